/**
 * The qloop-kernel JupyterLab plugins: the comm bridge to the kernel with the
 * agent's cell proposals, the output mirror copied into cell metadata, the
 * agent-cell marker, and the approval cards of outside agents' requests.
 * (The renderers of answers and saved turns are the MIME extension in
 * `mime.ts`.)
 */
import {
  JupyterFrontEnd,
  JupyterFrontEndPlugin
} from '@jupyterlab/application';
import { ICommandPalette } from '@jupyterlab/apputils';
import { INotebookTracker } from '@jupyterlab/notebook';
import { ITranslator, nullTranslator } from '@jupyterlab/translation';

/* eslint-disable jupyter/prefer-lazy-imports -- every opened notebook needs
   these at once, and together they are a few kilobytes. */
import { chatPlugin } from './acp';
import { assistPlugin } from './assistview';
import { connectCommBridge } from './bridge';
import { copyToCellPlugin } from './copy';
import { TRANSLATION_DOMAIN } from './labels';
import { trackMarkers } from './marker';
import { trackMirrors } from './mirror';
import { eachContext, eachPanel } from './notebooks';
import { OutsideRequests, showOutsideRequests } from './outside';
import { addOutsideCallsCommand } from './outsideview';
import { planFirstPlugin } from './planfirst';
import { ProposalBoards, showProposals } from './proposalview';
import { restorePlugin } from './restore';
import { trackSource } from './source';
import { trackSuperseded } from './supersede';
import { usagePlugin } from './usage';
/* eslint-enable jupyter/prefer-lazy-imports */

/**
 * Lets each notebook's kernel save records into that notebook's cell
 * metadata, and shows the cells its agent proposes in every view of it.
 */
const commBridge: JupyterFrontEndPlugin<void> = {
  id: 'qloop-kernel:comm-bridge',
  description:
    "Saves qloop agent turns into the cells' metadata, and shows the cells the agent proposes.",
  autoStart: true,
  requires: [INotebookTracker],
  optional: [ITranslator],
  activate: (
    app: JupyterFrontEnd,
    tracker: INotebookTracker,
    translator: ITranslator | null
  ) => {
    const trans = (translator ?? nullTranslator).load(TRANSLATION_DOMAIN);
    const boards = new ProposalBoards();
    eachContext(tracker, context => {
      const model = () => (context.isDisposed ? null : context.model);
      connectCommBridge(context.sessionContext, model, boards.of(context));
    });
    eachPanel(tracker, panel =>
      showProposals(panel.content, boards.of(panel.context), trans)
    );
  }
};

/** Copies the record of a transcript output into the cell metadata on open. */
const mirrorSync: JupyterFrontEndPlugin<void> = {
  id: 'qloop-kernel:mirror-sync',
  description:
    'Copies saved qloop turns from cell outputs into cell metadata when a notebook opens.',
  autoStart: true,
  requires: [INotebookTracker],
  activate: (app: JupyterFrontEnd, tracker: INotebookTracker) => {
    eachContext(tracker, context => {
      context.ready
        .then(() => {
          if (!context.isDisposed) {
            trackMirrors(context.model);
          }
        })
        .catch(reason => {
          // JupyterLab reports the failed load itself.
          console.debug('qloop: notebook not loaded', reason);
        });
    });
  }
};

/** Marks cells whose metadata holds a saved turn, with a status badge. */
const agentCellMarker: JupyterFrontEndPlugin<void> = {
  id: 'qloop-kernel:agent-cell-marker',
  description:
    'Marks qloop agent cells with the status of their saved turn, and shows one rendering of it.',
  autoStart: true,
  requires: [INotebookTracker],
  optional: [ITranslator],
  activate: (
    app: JupyterFrontEnd,
    tracker: INotebookTracker,
    translator: ITranslator | null
  ) => {
    const trans = (translator ?? nullTranslator).load(TRANSLATION_DOMAIN);
    eachPanel(tracker, panel => {
      trackMarkers(panel.content, trans);
      trackSuperseded(panel.content);
      trackSource(panel.content);
    });
  }
};

/**
 * Shows the requests of outside agents (through qloop's MCP server in the
 * Jupyter server) on top of each notebook view, for the user to decide,
 * applies the cell changes accepted, and shows the calls saved in a notebook.
 */
const outsideAgents: JupyterFrontEndPlugin<void> = {
  id: 'qloop-kernel:outside-agents',
  description:
    "Shows outside agents' requests to a notebook's kernel as approval cards on top of the notebook, applies the cell changes accepted, and shows the calls saved in the notebook.",
  autoStart: true,
  requires: [INotebookTracker],
  optional: [ITranslator, ICommandPalette],
  activate: (
    app: JupyterFrontEnd,
    tracker: INotebookTracker,
    translator: ITranslator | null,
    palette: ICommandPalette | null
  ) => {
    const trans = (translator ?? nullTranslator).load(TRANSLATION_DOMAIN);
    const requests = new OutsideRequests(app.serviceManager.serverSettings);
    eachPanel(tracker, panel => showOutsideRequests(panel, requests, trans));
    addOutsideCallsCommand(app, tracker, trans, palette, (id, entries) =>
      requests.agentCell(id, entries)
    );
  }
};

const plugins: JupyterFrontEndPlugin<void>[] = [
  commBridge,
  mirrorSync,
  planFirstPlugin,
  assistPlugin,
  agentCellMarker,
  restorePlugin,
  copyToCellPlugin,
  outsideAgents,
  usagePlugin,
  chatPlugin
];

export default plugins;
