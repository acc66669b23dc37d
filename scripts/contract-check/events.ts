import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import type { Contract } from '../../src/contract/document.js';
import { type Drift, files } from './drift.js';

/** The code that names the events the outbox is written with: the storage, and the domain's order events. */
const EMITTING_SOURCES = ['src/storage', 'src/domain'];

function sourcesUnder(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((entry) => {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) return sourcesUnder(path);
    return entry.name.endsWith('.ts') ? [path] : [];
  });
}

/**
 * Every event kind the contract declares (`webhooks`) is emitted somewhere: its name appears as a
 * string in the storage code. (Emitting an undeclared kind does not compile: src/domain/events.ts.)
 */
export function checkEvents(root: string, contract: Contract): Drift[] {
  const declared = Object.keys((contract.dereferenced as { webhooks?: object }).webhooks ?? {});
  const sources = EMITTING_SOURCES.flatMap((dir) => sourcesUnder(join(root, dir))).map((path) =>
    readFileSync(path, 'utf8'),
  );
  return declared
    .filter((kind) => !sources.some((source) => source.includes(`'${kind}'`)))
    .map((kind) => ({
      what: `event ${kind} is declared but never emitted`,
      where: `${files.contract}: webhooks.${kind}`,
      fix: {
        edit: `emit '${kind}' from the change that makes it (${EMITTING_SOURCES.join(' or ')}), or remove it from the contract`,
      },
    }));
}
