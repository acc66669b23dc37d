import type { IncomingMessage } from 'node:http';
import type { Socket } from 'node:net';
import type { ApiError } from '../domain/errors.js';
import { afterAnswersOnTheirWay, type AnswerFor, writeClosingAnswer } from './raw-answers.js';

export interface ConnectAnswers {
  /** The error for a method on a request target no route serves (not-found.ts, `unroutableTarget`). */
  errorFor: (method: string, target: string) => ApiError;
  /** The error in the words of the version the target is under. */
  answerFor: AnswerFor;
  /** The request id its answer and log line carry (an X-Request-Id sent, when sane). */
  requestId: (request: IncomingMessage) => string;
  /** Told of each answer as it is written: its log line and metrics. */
  answered: (request: IncomingMessage, reqId: string, status: number) => void;
}

/**
 * The server's 'connect' listener. Node hands a CONNECT request to it with the bare socket, and
 * with none destroys the socket unanswered. This server is no proxy: the answer is that of any
 * method no route serves (a 405 with Allow on a known path, a 404 on another, a 400 for a
 * `host:port` target), written on the socket as the answers to unparsable requests are, then the
 * connection closes, as Node reads no more HTTP on it.
 */
export function answerConnect({ errorFor, answerFor, requestId, answered }: ConnectAnswers) {
  return (request: IncomingMessage, socket: Socket): void => {
    // Node took its own listeners off the socket: a reset is no longer reported, nor worth reporting.
    socket.on('error', () => undefined);
    // Whatever the client sends next is dropped, so its end is seen and the connection can close.
    socket.resume();
    const method = request.method ?? 'CONNECT';
    const target = request.url ?? '';
    const { status, ...answer } = answerFor(target, errorFor(method, target));
    const reqId = requestId(request);
    answered(request, reqId, status);
    // After the answers to requests pipelined before it, which Node may still be writing.
    afterAnswersOnTheirWay(socket, () => writeClosingAnswer(socket, status, reqId, answer));
  };
}
