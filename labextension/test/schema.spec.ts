/**
 * The extension and the kernel's JSON Schemas (qloop_kernel/schema) cannot
 * drift apart: the generated types are what the committed schemas give, the
 * value lists the record's readers know are the schema's, and the page
 * answers exactly the operations the protocol's schema names.
 *
 * Part of this is checked by the compiler: ts-jest type-checks this file, and
 * a `Same<A, B>` that does not hold fails to compile.
 */
import { spawnSync } from 'child_process';
import * as fs from 'fs';
import * as path from 'path';

import type {
  CellRecord,
  DecisionRecord,
  EgressRecord
} from '../src/generated/record';
import { handleRequest } from '../src/protocol';
import {
  KNOWN_DECISIONS,
  KNOWN_EGRESS_KINDS,
  KNOWN_STATUSES,
  READABLE_VERSIONS
} from '../src/record';

import { answerNow } from './answers';

const ROOT = path.resolve(__dirname, '..');
const SCHEMA_DIR = path.resolve(ROOT, '..', 'qloop_kernel', 'schema');

/** `true` when `A` and `B` are the same set of values, else `false`. */
type Same<A, B> = [A] extends [B] ? ([B] extends [A] ? true : false) : false;

interface ISchema {
  properties: { [name: string]: { enum?: unknown[] } };
  $defs: {
    [name: string]: {
      anyOf?: { $ref: string }[];
      properties?: { [name: string]: { const?: unknown } };
    };
  };
}

function schema(name: string): ISchema {
  return JSON.parse(fs.readFileSync(path.join(SCHEMA_DIR, name), 'utf-8'));
}

describe('the generated types', () => {
  it('are what the committed schemas give', () => {
    const check = spawnSync(
      process.execPath,
      ['scripts/schema-types.js', '--check'],
      { cwd: ROOT, encoding: 'utf-8' }
    );
    expect({ status: check.status, stderr: check.stderr }).toEqual({
      status: 0,
      stderr: ''
    });
  }, 60000);
});

describe('the record readers', () => {
  it('know every status, decision and egress kind of the schema', () => {
    const statuses: Same<
      (typeof KNOWN_STATUSES)[number],
      CellRecord['status']
    > = true;
    const decisions: Same<
      (typeof KNOWN_DECISIONS)[number],
      DecisionRecord['kind']
    > = true;
    const egress: Same<
      (typeof KNOWN_EGRESS_KINDS)[number],
      EgressRecord['kind']
    > = true;
    expect([statuses, decisions, egress]).toEqual([true, true, true]);
  });

  it('read every schema_version the schema allows', () => {
    const allowed = schema('record.schema.json').properties['schema_version'];
    expect([...READABLE_VERSIONS].sort()).toEqual(allowed.enum?.sort());
  });
});

describe('the page', () => {
  it('answers every operation of the schema, and no other', () => {
    const { $defs } = schema('protocol.schema.json');
    const requests = $defs['KernelRequest'].anyOf ?? [];
    const ops = requests.map(
      ({ $ref }) => $defs[$ref.split('/').pop()!].properties?.['op'].const
    );
    const ack = answerNow(
      handleRequest(
        { op: 'hello', request_id: 'r1' },
        { findCell: () => undefined },
        { frontend: 'jupyterlab', version: '9.9.9' }
      )
    );
    expect([...(ack['operations'] as string[])].sort()).toEqual(
      [...new Set(ops)].sort()
    );
  });
});
