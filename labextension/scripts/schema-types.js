/*
 * The TypeScript types of the kernel's JSON Schemas (qloop_kernel/schema),
 * written into src/generated/ by json-schema-to-typescript.
 *
 *   node scripts/schema-types.js          write them
 *   node scripts/schema-types.js --check  exit 1 where a committed file differs
 *
 * `jlpm schema` regenerates the schemas from the Python types first.
 */
const fs = require('fs');
const path = require('path');
const prettier = require('prettier');
const { compile } = require('json-schema-to-typescript');

const ROOT = path.resolve(__dirname, '..');
const SCHEMA_DIR = path.resolve(ROOT, '..', 'qloop_kernel', 'schema');
const OUT_DIR = path.join(ROOT, 'src', 'generated');

const OPTIONS = {
  bannerComment: '',
  format: false,
  unknownAny: true
};

function readSchema(name) {
  return JSON.parse(fs.readFileSync(path.join(SCHEMA_DIR, name), 'utf-8'));
}

/** The names of the definitions a schema node refers to. */
function refsOf(node, found = new Set()) {
  if (Array.isArray(node)) {
    node.forEach(item => refsOf(item, found));
  } else if (node !== null && typeof node === 'object') {
    const match = /^#\/\$defs\/(.+)$/.exec(node.$ref ?? '');
    if (match) {
      found.add(match[1]);
    }
    Object.values(node).forEach(value => refsOf(value, found));
  }
  return found;
}

/** The definitions no message refers to, even indirectly (the answers by op). */
function unreachable(schema) {
  const { $defs, ...root } = schema;
  const seen = new Set();
  const todo = [...refsOf(root)];
  while (todo.length > 0) {
    const name = todo.pop();
    if (!seen.has(name)) {
      seen.add(name);
      todo.push(...refsOf($defs[name]));
    }
  }
  return Object.keys($defs).filter(name => !seen.has(name));
}

/**
 * The types of a schema: its root and every definition, also those the root
 * does not refer to (the generator declares those only beside an object root).
 */
async function typesOf(schema) {
  const parts = [await compile(schema, schema.title, OPTIONS)];
  for (const name of unreachable(schema)) {
    const alone = { ...schema.$defs[name], $defs: schema.$defs };
    parts.push(
      await compile(alone, name, {
        ...OPTIONS,
        declareExternallyReferenced: false
      })
    );
  }
  return parts.join('\n');
}

function banner(schemaFile) {
  return [
    '/**',
    ` * Generated from qloop_kernel/schema/${schemaFile} by \`jlpm schema\`:`,
    ' * do not edit. docs/schema.md says how the types are kept in step.',
    ' */'
  ].join('\n');
}

/**
 * The protocol schema without the record's definitions: a reference to one
 * becomes a reference to the type of that name, imported from record.ts.
 */
function withoutShared(protocol, shared) {
  const used = new Set();
  const rewrite = node => {
    if (Array.isArray(node)) {
      return node.map(rewrite);
    }
    if (node === null || typeof node !== 'object') {
      return node;
    }
    const match = /^#\/\$defs\/(.+)$/.exec(node.$ref ?? '');
    if (match && shared.has(match[1])) {
      used.add(match[1]);
      return { tsType: match[1] };
    }
    return Object.fromEntries(
      Object.entries(node).map(([key, value]) => [key, rewrite(value)])
    );
  };
  const $defs = Object.fromEntries(
    Object.entries(protocol.$defs).filter(([name]) => !shared.has(name))
  );
  return { schema: rewrite({ ...protocol, $defs }), used };
}

/** Each generated file's path and its content. */
async function generate() {
  const record = readSchema('record.schema.json');
  const protocol = readSchema('protocol.schema.json');
  const shared = new Set([record.title, ...Object.keys(record.$defs)]);
  const { schema, used } = withoutShared(protocol, shared);
  const imports = `import type { ${[...used].sort().join(', ')} } from './record';`;
  const files = {
    'record.ts': [banner('record.schema.json'), await typesOf(record)],
    'protocol.ts': [
      banner('protocol.schema.json'),
      imports,
      await typesOf(schema)
    ]
  };
  const generated = {};
  for (const [name, parts] of Object.entries(files)) {
    const file = path.join(OUT_DIR, name);
    const style = await prettier.resolveConfig(file);
    generated[file] = await prettier.format(parts.join('\n\n'), {
      ...style,
      filepath: file
    });
  }
  return generated;
}

async function main(check) {
  const generated = await generate();
  let stale = 0;
  for (const [file, content] of Object.entries(generated)) {
    const shown = path.relative(ROOT, file);
    if (!check) {
      fs.mkdirSync(path.dirname(file), { recursive: true });
      fs.writeFileSync(file, content);
      console.log(`wrote ${shown}`);
    } else if (
      !fs.existsSync(file) ||
      fs.readFileSync(file, 'utf-8') !== content
    ) {
      console.error(`${shown} differs from the schema: run jlpm schema`);
      stale += 1;
    }
  }
  return stale === 0 ? 0 : 1;
}

module.exports = { generate };

if (require.main === module) {
  main(process.argv.includes('--check')).then(
    code => {
      process.exitCode = code;
    },
    error => {
      console.error(error);
      process.exitCode = 2;
    }
  );
}
