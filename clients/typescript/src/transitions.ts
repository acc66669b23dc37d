import { transitions } from './generated/contract.js';

type Machines = typeof transitions;
/** A status of any schema with `x-transitions` (an animal's, an order's). */
export type Status = { [M in keyof Machines]: keyof Machines[M] }[keyof Machines];
/** The statuses of the schema `from` belongs to. */
export type StatusBeside<F extends Status> = {
  [M in keyof Machines]: F extends keyof Machines[M] ? keyof Machines[M] : never;
}[keyof Machines];

export { transitions };

/** Whether the contract's `x-transitions` let a status move from `from` to `to`. */
export function canMove<F extends Status>(from: F, to: StatusBeside<F>): boolean {
  return Object.values(transitions).some((moves) =>
    ((moves as Record<string, readonly string[] | undefined>)[from] ?? []).includes(to),
  );
}
