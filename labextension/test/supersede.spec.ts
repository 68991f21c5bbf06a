/**
 * One rendering of a saved turn: which outputs of a reopened agent cell the
 * transcript view supersedes, and its toggle.
 */
import { nullTranslator } from '@jupyterlab/translation';

import { trackLiveClient } from '../src/live';
import { ANSWER_MIME, TRANSCRIPT_MIME } from '../src/record';
import {
  IOutputLike,
  SHOW_SUPERSEDED_CLASS,
  isTurnOutput,
  liveOutputToggle,
  supersededIndexes
} from '../src/supersede';

const trans = nullTranslator.load('qloop-kernel');

function display(data: IOutputLike['data'], metadata = {}): IOutputLike {
  return { type: 'display_data', data, metadata };
}

const STREAM: IOutputLike = { type: 'stream', data: {}, metadata: {} };
const LINE = display({
  'text/html': "<div class='qloop-line qloop-info'>model call 1/20</div>",
  'text/plain': 'model call 1/20'
});
const UNASKED = display({
  'text/html': ["<div class='qloop-unasked'><b>run_code</b>", '</div>']
});
const CARD = display({
  'application/vnd.jupyter.widget-view+json': { model_id: 'abc' },
  'text/plain': 'VBox(children=(HTML(...)))'
});
const ANSWER = display({ [ANSWER_MIME]: { markdown: 'Done.' } });
const PLOT = display({ 'image/png': 'iVBOR...', 'text/plain': '<Figure>' });
const TABLE = display({ 'text/html': '<table><tr><td>1</td></tr></table>' });
const HTML_LOOKALIKE = display({
  'text/html': "<p>see <div class='qloop-line'>x</div></p>"
});
const ERROR: IOutputLike = {
  type: 'error',
  data: { 'application/vnd.jupyter.stderr': 'AgentError: budget' },
  metadata: {}
};

function transcript(liveClient?: string): IOutputLike {
  return display(
    { [TRANSCRIPT_MIME]: { schema_version: 2 }, 'text/plain': 'turn' },
    liveClient ? { [TRANSCRIPT_MIME]: { live_client: liveClient } } : {}
  );
}

describe('the live output a transcript view supersedes', () => {
  it('is the turn rendering: streams, lines, cards and answers', () => {
    expect([STREAM, LINE, UNASKED, CARD, ANSWER].map(isTurnOutput)).toEqual([
      true,
      true,
      true,
      true,
      true
    ]);
  });

  it('never plots, tables, errors or HTML that only mentions a line', () => {
    expect([PLOT, TABLE, HTML_LOOKALIKE, ERROR].map(isTurnOutput)).toEqual([
      false,
      false,
      false,
      false
    ]);
  });

  it('is hidden next to a transcript from elsewhere, whatever its place', () => {
    const outputs = [LINE, CARD, STREAM, PLOT, ANSWER, transcript(), ERROR];
    expect(supersededIndexes(outputs)).toEqual([0, 1, 2, 4]);
    const first = [transcript('someone-else'), STREAM, TABLE, ANSWER];
    expect(supersededIndexes(first)).toEqual([1, 3]);
  });

  it('stays next to the transcript of a turn run from this page', () => {
    trackLiveClient('this-page', { connect: () => undefined });
    expect(supersededIndexes([LINE, CARD, transcript('this-page')])).toEqual(
      []
    );
  });

  it('is nothing in a cell without a transcript', () => {
    expect(supersededIndexes([STREAM, LINE, CARD, ANSWER])).toEqual([]);
  });
});

describe('the live output toggle', () => {
  it('shows and hides the superseded output of its own output area', () => {
    const area = document.createElement('div');
    area.className = 'jp-OutputArea';
    const child = document.createElement('div');
    area.appendChild(child);
    const toggle = liveOutputToggle(trans);
    child.appendChild(toggle);
    expect(toggle.textContent).toBe('show the live output of this turn');
    expect(toggle.getAttribute('aria-pressed')).toBe('false');
    toggle.click();
    expect(area.classList.contains(SHOW_SUPERSEDED_CLASS)).toBe(true);
    expect(toggle.textContent).toBe('hide the live output of this turn');
    expect(toggle.getAttribute('aria-pressed')).toBe('true');
    toggle.click();
    expect(area.classList.contains(SHOW_SUPERSEDED_CLASS)).toBe(false);
  });
});
