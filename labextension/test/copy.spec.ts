/**
 * "Copy to cell": the button's event and where the copies go.
 */
import { CodeCellModel } from '@jupyterlab/cells';
import { nullTranslator } from '@jupyterlab/translation';

import { insertIndex } from '../src/copy';
import { COPY_EVENT, copyButton } from '../src/copybutton';

const trans = nullTranslator.load('qloop-kernel');

describe('copyButton', () => {
  it('sends the step code in a bubbling event', () => {
    const host = document.createElement('div');
    const button = copyButton('df = df.dropna()', trans);
    host.appendChild(button);
    const received: string[] = [];
    host.addEventListener(COPY_EVENT, event =>
      received.push((event as CustomEvent<{ code: string }>).detail.code)
    );
    button.click();
    expect(received).toEqual(['df = df.dropna()']);
    expect(button.textContent).toBe('Copy to cell');
  });
});

describe('insertIndex', () => {
  it('puts each copy after the agent cell and the copies before it', () => {
    const cells = [0, 1, 2, 3].map(() => new CodeCellModel({}));
    const copies = new WeakSet([cells[2]]);
    expect(insertIndex(cells, 1, copies)).toBe(3);
    expect(insertIndex(cells, 0, copies)).toBe(1);
    expect(insertIndex(cells, 3, copies)).toBe(4);
  });
});
