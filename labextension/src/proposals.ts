/**
 * The proposals of the agent that wait for the user in one notebook.
 *
 * The comm bridge presents a proposal and waits for its decision; the
 * notebook views show a bar on the proposal's cell and decide it when the
 * user clicks. A proposal is withdrawn, without a decision, when the comm it
 * came on closes or the notebook closes.
 */

/** The cell type of a proposed new cell. */
export type ProposalCellType = 'code' | 'markdown';

/** A proposal as the user sees it. */
export interface IProposal {
  /** Unique among the waiting proposals of the notebook. */
  readonly id: string;
  readonly kind: 'add' | 'edit';
  readonly cellType: ProposalCellType;
  /** The proposed source. */
  readonly source: string;
  /** The cell the bar sits on: the inserted cell (add) or the target (edit). */
  readonly cellId: string;
  /** The agent cell whose turn made the proposal. */
  readonly agentCell: string;
  /** The risk class of the code, or '' (markdown). */
  readonly risk: string;
  readonly reasons: readonly string[];
  /** Accepting also runs the new cell (its outputs land in it). */
  readonly run?: boolean;
  /** What the proposed code would change, from the kernel's run ahead, or why it was not run. */
  readonly effect?: IProposalEffect;
}

/**
 * What a proposed code cell would change: one line per variable from a run
 * ahead the kernel took back (`changes`), or why it was not run ahead, or not
 * to its end (`note`, shown instead).
 */
export interface IProposalEffect {
  readonly changes: readonly string[];
  readonly note: string;
}

/**
 * Whether the proposal is an edit that the page's Fix or Edit with agent of
 * the cell made (the turn ran with the cell's own id): the bar offers Accept
 * and run, which accepts it and runs the cell as the user would.
 */
export function reruns(proposal: IProposal): boolean {
  return proposal.kind === 'edit' && proposal.agentCell === proposal.cellId;
}

/** What the user decided ('elsewhere': on another page of a shared notebook). */
export interface IDecision {
  decision: 'accepted' | 'rejected' | 'elsewhere';
  /** What the user typed when rejecting, or ''. */
  reason: string;
  /** Accept and run: the page runs the accepted cell (an edit of the cell's own Fix or Edit). */
  run?: boolean;
}

/** A proposal decided on another page: this page changes nothing and answers nothing. */
export const ELSEWHERE: IDecision = { decision: 'elsewhere', reason: '' };

/** The reason given when the user deletes the cell of a waiting proposal. */
export const DELETED_REASON = 'the user deleted the cell';

interface IWaiting {
  proposal: IProposal;
  settle: (decision: IDecision | null) => void;
}

/** The waiting proposals of one notebook. */
export class ProposalBoard {
  private readonly _waiting = new Map<string, IWaiting>();
  private readonly _effects = new Map<string, string>();
  private readonly _listeners = new Set<() => void>();
  private _disposed = false;

  /** The waiting proposals, in the order they came. */
  get waiting(): IProposal[] {
    return Array.from(this._waiting.values(), entry => entry.proposal);
  }

  /** Whether a proposal with this id waits. */
  has(proposalId: string): boolean {
    return this._waiting.has(proposalId);
  }

  /** How many proposals of this agent cell wait. */
  countFor(agentCell: string): number {
    return this.waiting.filter(proposal => proposal.agentCell === agentCell)
      .length;
  }

  /**
   * What the cells the agent ran did to the kernel's variables, by cell id:
   * shown on the cell until the user dismisses it or runs the cell again.
   */
  get effects(): ReadonlyMap<string, string> {
    return this._effects;
  }

  /** The agent ran cell `cellId`: show what it did (nothing to show clears it). */
  showEffect(cellId: string, effect: string): void {
    if (this._disposed || this._effects.get(cellId) === (effect || undefined)) {
      return;
    }
    if (effect) {
      this._effects.set(cellId, effect);
    } else {
      this._effects.delete(cellId);
    }
    this._emit();
  }

  /** Stop showing the effect on cell `cellId`. */
  dismissEffect(cellId: string): void {
    if (this._effects.delete(cellId)) {
      this._emit();
    }
  }

  /** Call `listener` whenever a proposal or an effect comes or goes; returns the disconnect. */
  onChanged(listener: () => void): () => void {
    this._listeners.add(listener);
    return () => this._listeners.delete(listener);
  }

  /**
   * Show a proposal until the user decides it. Resolves with the decision,
   * or with null when the proposal is withdrawn (the signal aborts or the
   * board is disposed).
   */
  present(
    proposal: IProposal,
    signal?: AbortSignal
  ): Promise<IDecision | null> {
    if (this._disposed || signal?.aborted) {
      return Promise.resolve(null);
    }
    if (this._waiting.has(proposal.id)) {
      return Promise.reject(
        new Error(`a proposal with id ${proposal.id} already waits`)
      );
    }
    return new Promise(resolve => {
      const withdraw = () => this._settle(proposal.id, null);
      signal?.addEventListener('abort', withdraw);
      this._waiting.set(proposal.id, {
        proposal,
        settle: decision => {
          signal?.removeEventListener('abort', withdraw);
          resolve(decision);
        }
      });
      this._emit();
    });
  }

  /** Withdraw one waiting proposal (no decision): the kernel no longer asks about it. */
  withdraw(proposalId: string): void {
    this._settle(proposalId, null);
  }

  /** The proposal was decided on another page of the shared notebook: its bar goes. */
  settleElsewhere(proposalId: string): void {
    this._settle(proposalId, ELSEWHERE);
  }

  /** Decide one waiting proposal; nothing happens for one that no longer waits. */
  decide(proposalId: string, decision: IDecision): void {
    this._settle(proposalId, decision);
  }

  /** Decide every waiting proposal of the agent cell. */
  decideAll(agentCell: string, decision: IDecision): void {
    this.waiting
      .filter(proposal => proposal.agentCell === agentCell)
      .forEach(proposal => this._settle(proposal.id, decision));
  }

  /** Reject the waiting proposals whose cell is gone (the user deleted it). */
  sweep(cellExists: (cellId: string) => boolean): void {
    this.waiting
      .filter(proposal => !cellExists(proposal.cellId))
      .forEach(proposal =>
        this._settle(proposal.id, {
          decision: 'rejected',
          reason: DELETED_REASON
        })
      );
  }

  /** Withdraw every waiting proposal: the notebook is closing. */
  dispose(): void {
    this._disposed = true;
    Array.from(this._waiting.keys()).forEach(id => this._settle(id, null));
    this._effects.clear();
    this._listeners.clear();
  }

  private _settle(proposalId: string, decision: IDecision | null): void {
    const entry = this._waiting.get(proposalId);
    if (!entry) {
      return;
    }
    this._waiting.delete(proposalId);
    entry.settle(decision);
    this._emit();
  }

  private _emit(): void {
    this._listeners.forEach(listener => listener());
  }
}
