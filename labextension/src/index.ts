/**
 * The qloop-kernel JupyterLab plugin: the comm bridge to the kernel, the
 * output mirror copied into cell metadata, and the agent-cell marker.
 */
import {
  JupyterFrontEnd,
  JupyterFrontEndPlugin
} from '@jupyterlab/application';
import { INotebookTracker, NotebookPanel } from '@jupyterlab/notebook';

/* eslint-disable jupyter/prefer-lazy-imports -- every opened notebook needs
   these at once, and together they are a few kilobytes. */
import { connectCommBridge } from './bridge';
import { trackMarkers } from './marker';
import { trackMirrors } from './mirror';
/* eslint-enable jupyter/prefer-lazy-imports */

/** Wire one notebook context (shared by all views of a notebook). */
function attachContext(context: NotebookPanel['context']): void {
  const model = () => (context.isDisposed ? null : context.model);
  connectCommBridge(context.sessionContext, model);
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
}

/** Attach to a notebook view, and to its context unless another view did. */
function attachPanel(panel: NotebookPanel, contexts: WeakSet<object>): void {
  if (!contexts.has(panel.context)) {
    contexts.add(panel.context);
    attachContext(panel.context);
  }
  trackMarkers(panel.content);
}

const plugin: JupyterFrontEndPlugin<void> = {
  id: 'qloop-kernel:plugin',
  description:
    'Saves qloop agent turns into cell metadata and marks agent cells.',
  autoStart: true,
  requires: [INotebookTracker],
  activate: (app: JupyterFrontEnd, tracker: INotebookTracker) => {
    const contexts = new WeakSet<object>();
    tracker.forEach(panel => attachPanel(panel, contexts));
    tracker.widgetAdded.connect((_, panel) => attachPanel(panel, contexts));
  }
};

export default plugin;
