/**
 * The operations other than `propose` answer at once: these tests read the
 * ack itself, and fail if one answers later.
 */
import { Answer, IAck, handleRequest } from '../src/protocol';

/** The ack of an answer given at once. */
export function answerNow(answer: Answer): IAck {
  if (answer instanceof Promise) {
    throw new Error('the request was answered later, not at once');
  }
  return answer;
}

/** Answer a request that must be answered at once. */
export function handleNow(...args: Parameters<typeof handleRequest>): IAck {
  return answerNow(handleRequest(...args));
}
