import type { ContractOperation } from './contract.js';

export interface PathEntry {
  /** The `Allow` value: the contract's methods for this path. */
  allow: string;
  /** The contract's operations on this path, by upper-case method. */
  operations: Map<string, ContractOperation>;
  /** The path parameters' names, in order. */
  parameters: string[];
}

/**
 * Matches request paths against the contract's path templates, for the answers fastify's router
 * cannot give: 405 with `Allow`, and the operation behind a URL the router could not decode.
 */
export class PathTable {
  private readonly entries: (PathEntry & { pattern: RegExp })[];

  constructor(basePath: string, operations: ContractOperation[]) {
    const byPath = new Map<string, Map<string, ContractOperation>>();
    for (const operation of operations) {
      const methods = byPath.get(operation.path) ?? new Map<string, ContractOperation>();
      methods.set(operation.method, operation);
      byPath.set(operation.path, methods);
    }
    this.entries = [...byPath].map(([path, methods]) => ({
      // As fastify routes: a path parameter matches one segment, possibly empty.
      pattern: new RegExp(`^${basePath}${path.replace(/[.*+?^$()|[\]\\]/g, '\\$&').replace(/\{[^}]+\}/g, '[^/]*')}$`),
      allow: [...methods.keys()].sort().join(', '),
      operations: methods,
      parameters: [...path.matchAll(/\{([^}]+)\}/g)].map((match) => match[1] ?? ''),
    }));
  }

  /** The entry for a URL (query ignored), or undefined when the contract has no such path. */
  match(url: string): PathEntry | undefined {
    const path = url.split('?', 1)[0] ?? '';
    return this.entries.find(({ pattern }) => pattern.test(path));
  }
}
