import type { Api, Status, StatusBeside } from './types.js';

/** `canMove` of one version: whether its contract's `x-transitions` let a status move from `from` to `to`. */
export function canMoveWith<A extends Api>(transitions: A['transitions']) {
  return <F extends Status<A>>(from: F, to: StatusBeside<A, F>): boolean =>
    Object.values(transitions).some((moves) => (moves[from] ?? []).includes(to));
}
