import type { Contract, ContractOperation } from './document.js';

export interface PathEntry {
  /** The `Allow` value: the methods served on this path. */
  allow: string;
  /** The contract's operations on this path, by upper-case method (none on a path outside it). */
  operations: Map<string, ContractOperation>;
  /** The path parameters' names, in order. */
  parameters: string[];
}

/**
 * Matches request paths against the contract's path templates, and the fixed paths served outside
 * it (`serve`), for the answers fastify's router cannot give: 405 with `Allow`, and the operation
 * behind a URL the router could not decode.
 */
export class PathTable {
  private readonly entries: (PathEntry & { pattern: RegExp })[];
  private readonly outside = new Map<string, PathEntry>();

  /** The operations of each version served, each under its contract's base path. */
  constructor(versions: readonly Pick<Contract, 'basePath' | 'operations'>[]) {
    this.entries = versions.flatMap(({ basePath, operations }) => PathTable.entriesOf(basePath, operations));
  }

  private static entriesOf(basePath: string, operations: ContractOperation[]): (PathEntry & { pattern: RegExp })[] {
    const byPath = new Map<string, Map<string, ContractOperation>>();
    for (const operation of operations) {
      const methods = byPath.get(operation.path) ?? new Map<string, ContractOperation>();
      methods.set(operation.method, operation);
      byPath.set(operation.path, methods);
    }
    return [...byPath].map(([path, methods]) => ({
      // A path parameter names one segment, not an empty one: fastify's router would take `/v1/pets/`
      // for getPet, and emptyPathParameterIsUnroutable answers it as a path nothing is served on.
      pattern: new RegExp(`^${basePath}${path.replace(/[.*+?^$()|[\]\\]/g, '\\$&').replace(/\{[^}]+\}/g, '[^/]+')}$`),
      allow: allowOf(methods.keys()),
      operations: methods,
      parameters: [...path.matchAll(/\{([^}]+)\}/g)].map((match) => match[1] ?? ''),
    }));
  }

  /** Adds methods served on a fixed path outside the contract (/healthz, the contract documents, /docs). */
  serve(path: string, methods: readonly string[]): void {
    const served = this.outside.get(path)?.allow.split(', ') ?? [];
    this.outside.set(path, { allow: allowOf([...served, ...methods]), operations: new Map(), parameters: [] });
  }

  /** The entry for a URL (query ignored), or undefined when nothing is served on its path. */
  match(url: string): PathEntry | undefined {
    const path = pathOf(url);
    return this.outside.get(path) ?? this.entries.find(({ pattern }) => pattern.test(path));
  }
}

/**
 * A request target's path: the query dropped, and an absolute-form target's scheme and host
 * (`http://host/path`), as the router drops them.
 */
export function pathOf(url: string): string {
  const target = url.split('?', 1)[0] ?? '';
  return target.startsWith('/') ? target : target.replace(/^https?:\/\/[^/]*/i, '');
}

function allowOf(methods: Iterable<string>): string {
  return [...new Set(methods)].sort().join(', ');
}
