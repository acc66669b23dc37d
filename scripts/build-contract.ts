/**
 * Run by `npm run build`, after tsc: validates the served contracts once, so that a start need not.
 * Writes to dist/contract/:
 * - openapi.json: the contract as written and dereferenced, keyed by the SHA-256 of its bytes
 *   (loadContract uses it only for those bytes, and validates anything else itself); likewise
 *   v1.2.0.json for each older version's served release (every test file and every start loads it);
 * - meta-schema.mjs: the OpenAPI meta-schema fastify-openapi-glue validates the contract against,
 *   compiled to standalone code with the validator's own ajv options (see src/contract/meta-schema.ts).
 * An invalid contract fails the build, naming what is wrong; so do a generated/ (or the TypeScript
 * client's generated/) the contract has moved on from (run npm run generate) and an operation without a handler (`npm run dev` serves
 * one from the contract; nothing else may).
 */
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { Ajv2020 } from 'ajv/dist/2020.js';
import standaloneCode from 'ajv/dist/standalone/index.js';
import addFormats from 'ajv-formats';
import { join } from 'node:path';
import {
  type CompiledContract,
  compiledContractFile,
  compiledContractFileFor,
  loadContract,
  sha256,
  validateContract,
} from '../src/contract/document.js';
import { metaSchemaFile, metaSchemaVersion, precompiledMetaSchemaFile } from '../src/contract/meta-schema.js';
import { compiledContractDir, contractPath, projectRoot } from '../src/contract/paths.js';
import { API_VERSIONS } from '../src/versions/index.js';
import { newestRelease } from '../src/versions/releases.js';
import { checkHandlers } from './contract-check/handlers.js';
import { staleClientFiles } from './contract/generate-client.js';
import { staleGeneratedTypes } from './contract/generate-types.js';

/**
 * What @seriousme/openapi-schema-validator's getAjvValidator does, to source instead of to memory:
 * Ajv2020 without strict mode, ajv-formats, and `media-range` accepted as is.
 */
export function compileMetaSchema(version: string): string {
  const file = metaSchemaFile(version);
  const source = readFileSync(file);
  const ajv = addFormats.default(new Ajv2020({ strict: false, code: { source: true, esm: true } }));
  ajv.addFormat('media-range', true);
  const validate = ajv.compile(JSON.parse(source.toString('utf8')) as object);
  return [
    `// Compiled by scripts/build-contract.ts from ${file}; do not edit.`,
    `export const version = ${JSON.stringify(version)};`,
    `export const schemaSha256 = ${JSON.stringify(sha256(source))};`,
    standaloneCode.default(ajv, validate),
    '',
  ].join('\n');
}

export async function buildContract(path: string = contractPath): Promise<CompiledContract> {
  const sourceSha256 = sha256(readFileSync(path));
  const { document, dereferenced } = await validateContract(path).catch((error: unknown) => {
    throw new Error(
      `${path} is not a valid OpenAPI document: ${error instanceof Error ? error.message : String(error)}`,
    );
  });
  return { sourceSha256, document, dereferenced };
}

/** Keeps what a start needs from a validated contract in dist/contract/. */
export function writeCompiledContract(compiled: CompiledContract): void {
  mkdirSync(compiledContractDir, { recursive: true });
  writeFileSync(compiledContractFile, JSON.stringify(compiled));
  writeFileSync(precompiledMetaSchemaFile, compileMetaSchema(metaSchemaVersion(compiled.document.openapi)));
}

/** The release served for each older major version (src/versions/served.ts), validated as openapi.yaml is. */
async function writeServedReleases(): Promise<void> {
  for (const { major } of API_VERSIONS.slice(0, -1)) {
    const release = newestRelease(projectRoot, major);
    if (release === undefined) continue; // a start says so: version declared without a release
    const file = join(projectRoot, release.file);
    writeFileSync(compiledContractFileFor(file), JSON.stringify(await buildContract(file)));
  }
}

async function main(): Promise<void> {
  const compiled = await buildContract();
  writeCompiledContract(compiled);
  await writeServedReleases();
  // npm run contract:check builds with this: it reports these drifts itself, with diffs and fixes.
  if (process.argv.includes('--no-drift-check')) return;
  const problems: string[] = [];
  for (const file of await staleGeneratedTypes(projectRoot)) {
    problems.push(`${file} is not what its contract generates: run npm run generate`);
  }
  for (const file of await staleClientFiles(projectRoot, compiled)) {
    problems.push(`${file} is not what openapi.yaml generates: run npm run generate`);
  }
  for (const { what, where, fix } of checkHandlers(await loadContract())) {
    problems.push(`${what} (${where}): ${'run' in fix ? `run ${fix.run}` : fix.edit}`);
  }
  if (problems.length > 0) {
    process.stderr.write(
      `npm run build: the code does not cover the contract:\n${problems.map((p) => `  ${p}\n`).join('')}`,
    );
    process.exitCode = 1;
  }
}

if (import.meta.filename === process.argv[1]) await main();
