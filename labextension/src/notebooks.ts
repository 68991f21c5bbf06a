/**
 * Visiting the notebooks of the application: each notebook view, or each
 * notebook context once (two views of one notebook share their context).
 */
import { INotebookTracker, NotebookPanel } from '@jupyterlab/notebook';

/** Call `visit` for every notebook view, now and later. */
export function eachPanel(
  tracker: INotebookTracker,
  visit: (panel: NotebookPanel) => void
): void {
  tracker.forEach(visit);
  tracker.widgetAdded.connect((_, panel) => visit(panel));
}

/** Call `visit` once for every notebook context, now and later. */
export function eachContext(
  tracker: INotebookTracker,
  visit: (context: NotebookPanel['context']) => void
): void {
  const seen = new WeakSet<object>();
  eachPanel(tracker, panel => {
    if (!seen.has(panel.context)) {
      seen.add(panel.context);
      visit(panel.context);
    }
  });
}
