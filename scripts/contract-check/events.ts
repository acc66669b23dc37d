import { readdirSync, readFileSync } from 'node:fs';
import { join, relative } from 'node:path';
import type { Contract } from '../../src/contract/document.js';
import { type Drift, files } from './drift.js';

/** The storage code that writes the outbox: every event kind is emitted from there, by name. */
const EMITTING_SOURCES = 'src/storage';

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
  const sources = sourcesUnder(join(root, EMITTING_SOURCES)).map((path) => readFileSync(path, 'utf8'));
  return declared
    .filter((kind) => !sources.some((source) => source.includes(`'${kind}'`)))
    .map((kind) => ({
      what: `event ${kind} is declared but never emitted`,
      where: `${files.contract}: webhooks.${kind}`,
      fix: {
        edit: `emit '${kind}' from the change that makes it (${relative(root, join(root, EMITTING_SOURCES))}), or remove it from the contract`,
      },
    }));
}
