/**
 * What `npm run generate` writes to generated/, computed in-process: the same openapi-typescript
 * call its CLI makes with the flags package.json gives it, for each contract its Redocly config
 * lists (the newest version's, openapi.yaml, into generated/openapi.ts, and each older version's
 * newest release beside it). `npm run dev` uses it to regenerate within the loop, and
 * `npm run build` to check generated/ is current.
 */
import { readFileSync } from 'node:fs';
import { join, relative } from 'node:path';
import { pathToFileURL } from 'node:url';
import { loadConfig } from '@redocly/openapi-core';
import openapiTS, { astToString, COMMENT_HEADER } from 'openapi-typescript';

export const generatedTypesFile = 'generated/openapi.ts';
/** The Redocly config `npm run generate` names (see package.json). */
export const GENERATE_CONFIG = 'scripts/generate.redocly.yaml';

type Redocly = Awaited<ReturnType<typeof loadConfig>>;

async function typesOf(redocly: Redocly, contractFile: string): Promise<string> {
  const ast = await openapiTS(pathToFileURL(contractFile), { defaultNonNullable: false, redocly, silent: true });
  return `${COMMENT_HEADER}${astToString(ast)}`;
}

/** The newest version's types (generated/openapi.ts), from openapi.yaml. */
export async function generateTypes(root: string): Promise<string> {
  return generateTypesOf(root, 'openapi.yaml');
}

/** The types of one contract (`contracts/v1.2.0.yaml`, from the project root), as generate:types writes them. */
export async function generateTypesOf(root: string, contractFile: string): Promise<string> {
  const redocly = await loadConfig({ configPath: join(root, GENERATE_CONFIG) });
  return typesOf(redocly, join(root, contractFile));
}

/** Every file of generated/ by its path from the project root, with its text. */
export async function generateTypeFiles(root: string): Promise<Map<string, string>> {
  const configPath = join(root, GENERATE_CONFIG);
  const redocly = await loadConfig({ configPath });
  const configDir = join(configPath, '..');
  const apis = Object.values(redocly.apis) as { root: string; 'x-openapi-ts'?: { output?: string } }[];
  const entries = await Promise.all(
    apis.map(async (api) => {
      const output = api['x-openapi-ts']?.output;
      if (output === undefined) throw new Error(`${GENERATE_CONFIG}: ${api.root} names no x-openapi-ts output`);
      const file = relative(root, join(configDir, output));
      return [file, await typesOf(redocly, join(configDir, api.root))] as const;
    }),
  );
  return new Map(entries);
}

/** Of `expected` (text by path from the root), the files committed otherwise, or missing. */
export function staleFiles(root: string, expected: ReadonlyMap<string, string>): string[] {
  const committed = (file: string) => {
    try {
      return readFileSync(join(root, file), 'utf8');
    } catch {
      return undefined;
    }
  };
  return [...expected].filter(([file, text]) => committed(file) !== text).map(([file]) => file);
}

/** The files of generated/ that are not what the contracts generate (none when current). */
export async function staleGeneratedTypes(root: string): Promise<string[]> {
  return staleFiles(root, await generateTypeFiles(root));
}
