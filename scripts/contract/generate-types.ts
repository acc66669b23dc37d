/**
 * What `npm run generate` writes to generated/openapi.ts, computed in-process: the same
 * openapi-typescript call its CLI makes with the flags package.json gives it. `npm run dev` uses
 * it to regenerate within the loop, and `npm run build` to check generated/ is current.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { loadConfig } from '@redocly/openapi-core';
import openapiTS, { astToString, COMMENT_HEADER } from 'openapi-typescript';

export const generatedTypesFile = 'generated/openapi.ts';
/** The Redocly config `npm run generate` names (see package.json). */
const GENERATE_CONFIG = 'scripts/generate.redocly.yaml';

export async function generateTypes(root: string): Promise<string> {
  const redocly = await loadConfig({ configPath: join(root, GENERATE_CONFIG) });
  const ast = await openapiTS(pathToFileURL(join(root, 'openapi.yaml')), {
    defaultNonNullable: false,
    redocly,
    silent: true,
  });
  return `${COMMENT_HEADER}${astToString(ast)}`;
}

/** Undefined when generated/openapi.ts is what the contract generates; otherwise what it should be. */
export async function staleGeneratedTypes(root: string): Promise<string | undefined> {
  const expected = await generateTypes(root);
  let committed: string | undefined;
  try {
    committed = readFileSync(join(root, generatedTypesFile), 'utf8');
  } catch {
    committed = undefined;
  }
  return committed === expected ? undefined : expected;
}
