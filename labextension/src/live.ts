/**
 * Kernel connections of this page. A transcript published by a connection of
 * this page sits next to the live cell output (streamed text, approval cards)
 * and is shown folded; one from elsewhere (a reopened notebook, a headless
 * run) is the only view of the turn and is shown in full.
 */
const liveClients = new Set<string>();

/** Remember a kernel connection of this page until it is disposed. */
export function trackLiveClient(
  clientId: string,
  disposed: {
    connect: (slot: () => void) => unknown;
  }
): void {
  liveClients.add(clientId);
  disposed.connect(() => {
    liveClients.delete(clientId);
  });
}

/** Whether a transcript came from a kernel connection of this page. */
export function isLiveClient(clientId: unknown): boolean {
  return typeof clientId === 'string' && liveClients.has(clientId);
}
