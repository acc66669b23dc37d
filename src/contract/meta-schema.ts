/**
 * fastify-openapi-glue validates the specification it is given against the OpenAPI meta-schema,
 * through @seriousme/openapi-schema-validator, which compiles that meta-schema with ajv on every
 * start: the largest single cost of a cold start. `npm run build` compiles the same
 * meta-schema with the same ajv options into standalone code (scripts/build-contract.ts), and this
 * module hands that code to the validator: the glue still validates the contract on every start,
 * without compiling the meta-schema first.
 *
 * The validator offers no option for this, so its (undeclared) `getAjvValidator` is wrapped. The
 * precompiled code stands only for the meta-schema file whose hash it carries; a different file,
 * or a validator without that method, is left to compile as before: slower, never wrong.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { Validator } from '@seriousme/openapi-schema-validator';
import { sha256 } from './document.js';
import { compiledContractDir } from './paths.js';

/** A compiled JSON Schema validator as ajv makes it: a predicate with the last call's errors. */
export interface SchemaValidator {
  (data: unknown): boolean;
  errors?: unknown[] | null;
}

/** The module `npm run build` writes: the meta-schema of one OpenAPI version, compiled. */
export interface PrecompiledMetaSchema {
  /** The OpenAPI version the meta-schema is for, as the validator names it (`3.1`). */
  version: string;
  /** SHA-256 (hex) of the meta-schema file it was compiled from. */
  schemaSha256: string;
  validate: SchemaValidator;
}

export const precompiledMetaSchemaFile = join(compiledContractDir, 'meta-schema.mjs');

/** `3.1.0` -> `3.1`: the validator keeps one meta-schema per minor version. */
export function metaSchemaVersion(openapi: string): string {
  return openapi.split('.').slice(0, 2).join('.');
}

/** The meta-schema file the installed validator compiles for `version`. */
export function metaSchemaFile(version: string): string {
  const entry = fileURLToPath(import.meta.resolve('@seriousme/openapi-schema-validator'));
  return join(entry, '..', 'schemas', `v${version}`, 'schema.json');
}

interface ValidatorInternals {
  getAjvValidator(version: string): SchemaValidator;
}

let installed: PrecompiledMetaSchema | undefined;

/**
 * Makes every Validator use the build's compiled meta-schema, if it fits the installed one.
 * Returns whether it does (idempotent; safe to call before every app is built).
 */
export async function usePrecompiledMetaSchema(file: string = precompiledMetaSchemaFile): Promise<boolean> {
  if (installed !== undefined) return true;
  const prototype = Validator.prototype as unknown as Partial<ValidatorInternals>;
  const compile = prototype.getAjvValidator;
  if (typeof compile !== 'function') return false;
  const precompiled = await import(pathToFileURL(file).href).then(
    (module: PrecompiledMetaSchema) => module,
    () => undefined,
  );
  if (precompiled === undefined) return false;
  const installedSchema = readFileSync(metaSchemaFile(precompiled.version));
  if (sha256(installedSchema) !== precompiled.schemaSha256) return false;
  installed = precompiled;
  prototype.getAjvValidator = function getAjvValidator(this: ValidatorInternals, version: string) {
    return version === precompiled.version ? precompiled.validate : compile.call(this, version);
  };
  return true;
}
