/**
 * Shows the waiting proposals of a notebook in one of its views: a bar on
 * top of each proposed cell (or cell proposed for an edit), whose buttons
 * decide the proposal on the notebook's board. Two views of one notebook
 * show the same proposals, and either decides them. A cell the agent ran
 * shows what the run did to the kernel's variables, until the user dismisses
 * it or runs the cell.
 */
import { Cell } from '@jupyterlab/cells';
import { Notebook, NotebookPanel } from '@jupyterlab/notebook';
import { TranslationBundle } from '@jupyterlab/translation';
import { PanelLayout, Widget } from '@lumino/widgets';

import { proposalBar, setWaitingCount, updateDiff } from './proposalbar';
import { IDecision, IProposal, ProposalBoard } from './proposals';

/** Class of a cell that has a proposal bar. */
export const PROPOSED_CELL_CLASS = 'qloop-proposed-cell';

/**
 * The event a bar's Accept and run sends from its cell (bubbling): the
 * notebook view runs the cell once the accepted source is in it.
 */
export const RUN_ACCEPTED_EVENT = 'qloop:run-accepted-cell';

/** Class of the note on a cell the agent ran, saying what the run did. */
export const EFFECT_CLASS = 'qloop-cell-effect';

interface IShownBar {
  proposal: IProposal;
  cell: Cell;
  widget: Widget;
  stop: () => void;
}

function cellWidget(notebook: Notebook, cellId: string): Cell | undefined {
  return notebook.widgets.find(cell => cell.model.id === cellId);
}

/** The boards of the open notebooks, one per notebook (shared by its views). */
export class ProposalBoards {
  private readonly _boards = new WeakMap<object, ProposalBoard>();

  /** The board of a notebook context, withdrawn when the context is disposed. */
  of(context: NotebookPanel['context']): ProposalBoard {
    let board = this._boards.get(context);
    if (!board) {
      const created = new ProposalBoard();
      context.disposed.connect(() => created.dispose());
      this._boards.set(context, created);
      board = created;
    }
    return board;
  }
}

/** Put the bar of a proposal on top of its cell. */
function attach(
  cell: Cell,
  proposal: IProposal,
  board: ProposalBoard,
  trans: TranslationBundle
): IShownBar | null {
  if (!(cell.layout instanceof PanelLayout)) {
    return null;
  }
  const source = () =>
    proposal.kind === 'edit' ? cell.model.sharedModel.getSource() : '';
  const decide = (decision: IDecision, all: boolean) => {
    // The bar goes with the decision: keep the focus in the notebook.
    if (widget.node.contains(document.activeElement)) {
      cell.node.focus();
    }
    if (all) {
      board.decideAll(proposal.agentCell, decision);
    } else {
      board.decide(proposal.id, decision);
    }
    if (decision.run && decision.decision === 'accepted') {
      cell.node.dispatchEvent(
        new CustomEvent(RUN_ACCEPTED_EVENT, { bubbles: true })
      );
    }
  };
  // The kernel runs an edit ahead as code: its effect says nothing of another cell.
  const shown =
    cell.model.type === 'code' ? proposal : { ...proposal, effect: undefined };
  const node = proposalBar({
    proposal: shown,
    before: source(),
    trans,
    decide
  });
  const widget = new Widget({ node });
  cell.layout.insertWidget(0, widget);
  cell.addClass(PROPOSED_CELL_CLASS);
  // An edit shows its diff against the target as the user edits it meanwhile.
  const refresh = () => updateDiff(node, source(), proposal.source, trans);
  if (proposal.kind === 'edit') {
    cell.model.contentChanged.connect(refresh);
  }
  const stop = () => {
    if (!cell.isDisposed) {
      cell.model.contentChanged.disconnect(refresh);
    }
  };
  return { proposal, cell, widget, stop };
}

function detach(shown: IShownBar, others: Iterable<IShownBar>): void {
  shown.stop();
  shown.widget.dispose();
  const cell = shown.cell;
  const stillProposed = Array.from(others).some(
    other => other !== shown && other.cell === cell
  );
  if (!stillProposed && !cell.isDisposed) {
    cell.removeClass(PROPOSED_CELL_CLASS);
  }
}

interface IShownEffect {
  effect: string;
  cell: Cell;
  widget: Widget;
  stop: () => void;
}

/** Put the note of what the agent's run of `cell` did on top of the cell. */
function attachEffect(
  cell: Cell,
  effect: string,
  board: ProposalBoard,
  trans: TranslationBundle
): IShownEffect | null {
  if (!(cell.layout instanceof PanelLayout)) {
    return null;
  }
  const cellId = cell.model.id;
  const node = document.createElement('div');
  node.className = EFFECT_CLASS;
  node.setAttribute('role', 'status');
  const label = document.createElement('span');
  label.className = `${EFFECT_CLASS}-label`;
  label.textContent = trans.__('Run by the agent');
  const text = document.createElement('span');
  text.className = `${EFFECT_CLASS}-text`;
  text.textContent = effect; // text only: the kernel's words, never markup
  const dismiss = document.createElement('button');
  dismiss.type = 'button';
  dismiss.className = `${EFFECT_CLASS}-dismiss`;
  dismiss.textContent = trans.__('Dismiss');
  dismiss.addEventListener('click', () => {
    cell.node.focus();
    board.dismissEffect(cellId);
  });
  node.append(label, text, dismiss);
  const widget = new Widget({ node });
  cell.layout.insertWidget(0, widget);
  // The user's own run of the cell replaces what the agent's run did.
  const ran = (_: unknown, change: { name: string; newValue: unknown }) => {
    if (change.name === 'executionCount' && change.newValue !== null) {
      board.dismissEffect(cellId);
    }
  };
  cell.model.stateChanged.connect(ran);
  const stop = () => {
    if (!cell.isDisposed) {
      cell.model.stateChanged.disconnect(ran);
    }
  };
  return { effect, cell, widget, stop };
}

/** Show the board's waiting proposals in a notebook view, as they come and go. */
export function showProposals(
  notebook: Notebook,
  board: ProposalBoard,
  trans: TranslationBundle
): void {
  const shown = new Map<string, IShownBar>();
  const effects = new Map<string, IShownEffect>();
  const syncEffects = () => {
    for (const [cellId, note] of Array.from(effects)) {
      if (
        board.effects.get(cellId) !== note.effect ||
        cellWidget(notebook, cellId) !== note.cell
      ) {
        note.stop();
        note.widget.dispose();
        effects.delete(cellId);
      }
    }
    for (const [cellId, effect] of board.effects) {
      const cell = cellWidget(notebook, cellId);
      if (!effects.has(cellId) && cell) {
        const note = attachEffect(cell, effect, board, trans);
        if (note) {
          effects.set(cellId, note);
        }
      }
    }
  };
  const sync = () => {
    if (notebook.isDisposed) {
      return;
    }
    syncEffects();
    const waiting = new Map(board.waiting.map(p => [p.id, p]));
    for (const [id, bar] of Array.from(shown)) {
      const proposal = waiting.get(id);
      // A cell whose type changed has a new widget: the bar moves to it.
      if (!proposal || cellWidget(notebook, proposal.cellId) !== bar.cell) {
        detach(bar, shown.values());
        shown.delete(id);
      }
    }
    for (const proposal of waiting.values()) {
      const cell = cellWidget(notebook, proposal.cellId);
      if (!shown.has(proposal.id) && cell) {
        const bar = attach(cell, proposal, board, trans);
        if (bar) {
          shown.set(proposal.id, bar);
        }
      }
    }
    for (const bar of shown.values()) {
      const count = board.countFor(bar.proposal.agentCell);
      setWaitingCount(bar.widget.node, count, trans);
    }
  };
  const stopBoard = board.onChanged(sync);
  // The notebook creates the widgets of new cells in its own handler of this
  // signal, connected before this one.
  const cells = notebook.model?.cells;
  cells?.changed.connect(sync);
  notebook.disposed.connect(() => {
    stopBoard();
    cells?.changed.disconnect(sync);
    shown.forEach(bar => bar.stop());
    shown.clear();
    effects.forEach(note => note.stop());
    effects.clear();
  });
  sync();
}
