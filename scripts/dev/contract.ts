/**
 * The contract half of `npm run dev`, in-process: openapi.yaml validated (swagger-parser, as a
 * start validates it), generated/ and the client's generated/ regenerated (openapi-typescript and
 * scripts/contract/generate-client.ts, as `npm run generate` does), what a start reads written to
 * dist/contract/ (as `npm run build` writes it), and the contract linted with the committed
 * ruleset through the linter's Node API.
 */
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join, relative } from 'node:path';
import { parse } from 'yaml';
import { compiledContractFile, sha256, validateContract } from '../../src/contract/document.js';
import { metaSchemaFile, metaSchemaVersion, precompiledMetaSchemaFile } from '../../src/contract/meta-schema.js';
import { compiledContractDir, contractPath, projectRoot } from '../../src/contract/paths.js';
import { clientFiles } from '../contract/generate-client.js';
import { generatedTypesFile, generateTypes } from '../contract/generate-types.js';

const say = (line: string) => process.stdout.write(`${line}\n`);
const describe = (error: unknown) => (error instanceof Error ? error.message : String(error));
const contractName = relative(projectRoot, contractPath);

/** The meta-schema version compiled to dist/contract/ by this loop: it changes with `openapi:` only. */
let metaSchemaWritten: string | undefined;

/** Whether dist/contract/ holds the meta-schema compiled for `version` from the installed file. */
function metaSchemaCompiled(version: string): boolean {
  if (metaSchemaWritten === version) return true;
  const compiled = readOrUndefined(precompiledMetaSchemaFile) ?? '';
  const stamp = `export const version = ${JSON.stringify(version)};\nexport const schemaSha256 = ${JSON.stringify(sha256(readFileSync(metaSchemaFile(version))))};`;
  return compiled.includes(stamp);
}

function readOrUndefined(file: string): string | undefined {
  try {
    return readFileSync(file, 'utf8');
  } catch {
    return undefined;
  }
}

/**
 * Validates openapi.yaml and regenerates generated/ from it; true when it is good, with what a
 * start reads then in dist/contract/. What is wrong is printed.
 */
export async function checkContract(): Promise<boolean> {
  const sourceSha256 = sha256(readFileSync(contractPath));
  const [validated, types] = await Promise.allSettled([validateContract(contractPath), generateTypes(projectRoot)]);
  if (validated.status === 'rejected')
    say(`${contractName}: not a valid OpenAPI document: ${describe(validated.reason)}`);
  if (types.status === 'rejected') say(`${contractName}: types cannot be generated: ${describe(types.reason)}`);
  if (validated.status === 'rejected' || types.status === 'rejected') return false;

  mkdirSync(compiledContractDir, { recursive: true });
  writeFileSync(compiledContractFile, JSON.stringify({ sourceSha256, ...validated.value }));
  const version = metaSchemaVersion(validated.value.document.openapi);
  if (!metaSchemaCompiled(version)) {
    // Loaded only when needed: the build that `npm run dev` starts from has usually compiled it.
    const { compileMetaSchema } = await import('../build-contract.js');
    writeFileSync(precompiledMetaSchemaFile, compileMetaSchema(version));
  }
  metaSchemaWritten = version;
  const generated = new Map([[generatedTypesFile, types.value], ...clientFiles(types.value, validated.value)]);
  for (const [file, text] of generated) {
    if (readOrUndefined(join(projectRoot, file)) === text) continue;
    writeFileSync(join(projectRoot, file), text);
    say(`[dev] ${file} regenerated`);
  }
  return true;
}

/**
 * The ruleset of redocly.yaml, for the linter's Node API. Its `diff-*` presets configure
 * `redocly diff` (contract:check's breaking-change check), not lint, and the published
 * @redocly/openapi-core does not know them: they are left out.
 */
async function lintConfig() {
  const { loadConfig } = await import('redocly-openapi-core');
  const configPath = join(projectRoot, 'redocly.yaml');
  const { extends: presets = [] } = (parse(readFileSync(configPath, 'utf8')) ?? {}) as { extends?: string[] };
  return loadConfig({ configPath, customExtends: presets.filter((preset) => !preset.startsWith('diff-')) });
}

/**
 * Lints openapi.yaml with redocly.yaml's rules and prints each problem with its file and line.
 * `npm test` (contract:check, with Redocly's CLI) holds the contract to zero problems.
 */
export async function lintContract(): Promise<void> {
  try {
    const { getLineColLocation, lint } = await import('redocly-openapi-core');
    // A problem exempted in .redocly.lint-ignore.yaml comes back marked, as the CLI leaves it out.
    const problems = (await lint({ ref: contractPath, config: await lintConfig() })).filter(
      ({ ignored }) => ignored !== true,
    );
    for (const { ruleId, severity, message, location } of problems) {
      const [first] = location;
      const at =
        first === undefined ? '' : `:${getLineColLocation(first).start.line}:${getLineColLocation(first).start.col}`;
      say(
        `${first === undefined ? contractName : relative(projectRoot, first.source.absoluteRef)}${at}: lint ${severity} ${ruleId}: ${message}`,
      );
    }
    say(
      `[dev] ${problems.length === 0 ? `${contractName} lints clean` : `${contractName}: ${problems.length} lint problem(s) above`}`,
    );
  } catch (error) {
    say(`[dev] ${contractName}: lint could not run: ${describe(error)}`);
  }
}
