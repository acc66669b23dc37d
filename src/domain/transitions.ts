import type { OpenApiDocument } from '../contract/document.js';

interface StatusSchema {
  enum?: unknown[];
  'x-transitions'?: Record<string, unknown>;
}

/**
 * The moves a status schema of the contract allows (its `x-transitions`: for each status, the
 * statuses it may move to). Read from the contract at start, so the rules are written once.
 */
export class Transitions<S extends string> {
  private constructor(
    readonly schemaName: string,
    private readonly allowed: ReadonlyMap<S, ReadonlySet<S>>,
  ) {}

  /** The transitions of `components.schemas[name]`; throws when they do not cover its enum exactly. */
  static of<S extends string>(document: OpenApiDocument, name: string): Transitions<S> {
    const schema = document.components?.schemas?.[name] as StatusSchema | undefined;
    const states = (schema?.enum ?? []) as S[];
    const declared = schema?.['x-transitions'];
    if (states.length === 0 || declared === undefined) {
      throw new Error(`The contract's ${name} must have an enum and x-transitions`);
    }
    const allowed = new Map<S, ReadonlySet<S>>();
    for (const state of states) {
      const targets = declared[state];
      if (!Array.isArray(targets) || targets.some((target) => !states.includes(target as S))) {
        throw new Error(`${name}.x-transitions.${state} must list statuses of ${name}'s enum`);
      }
      allowed.set(state, new Set(targets as S[]));
    }
    const extra = Object.keys(declared).filter((state) => !states.includes(state as S));
    if (extra.length > 0) throw new Error(`${name}.x-transitions names unknown statuses: ${extra.join(', ')}`);
    return new Transitions(name, allowed);
  }

  allows(from: S, to: S): boolean {
    return this.allowed.get(from)?.has(to) === true;
  }
}
