/**
 * Requests generated from openapi.yaml, for the property-based tests in test/fuzz.test.ts.
 *
 * Nothing here names a field, a parameter or a path of the API: the operations, their parameters
 * and their request bodies are read from the dereferenced contract, valid values are derived from
 * each schema (type, enum, minimum/maximum, minLength/maxLength, simple patterns, min/maxProperties,
 * dependentRequired: unhonouredKeywords names any other a schema uses) and so are the
 * ways to break them. A parameter or field added to the contract is fuzzed without a change here.
 *
 * A request is built as a Draft: its parts as they go on the wire, plus the Faults put into it on
 * purpose, each saying which answers reject it correctly. A Draft without faults is valid.
 */
import { isUtf8 } from 'node:buffer';
import { METHODS } from 'node:http';
import { Ajv2020, type ValidateFunction } from 'ajv/dist/2020.js';
import addFormats from 'ajv-formats';
import fc from 'fast-check';
import type { OpenAPIV3_1 } from 'openapi-types';
import { contract } from './contract.js';

// ---------------------------------------------------------------------------------------------
// The contract, as the generators see it

export interface Schema {
  type?: string | string[];
  enum?: unknown[];
  minimum?: number;
  maximum?: number;
  minLength?: number;
  maxLength?: number;
  pattern?: string;
  format?: string;
  uniqueItems?: boolean;
  properties?: Record<string, Schema>;
  required?: string[];
  minProperties?: number;
  maxProperties?: number;
  dependentRequired?: Record<string, string[]>;
  items?: Schema;
  minItems?: number;
  maxItems?: number;
  default?: unknown;
  description?: string;
}

export type Location = 'path' | 'query' | 'header';

export interface Parameter {
  name: string;
  in: Location;
  required: boolean;
  schema: Schema;
  /** "Opaque" in its description: only the server's own values are valid, not every one the schema allows. */
  opaque: boolean;
}

export interface RequestBody {
  required: boolean;
  mediaTypes: string[];
  schema: Schema;
}

export interface Operation {
  id: string;
  method: string;
  template: string;
  parameters: Parameter[];
  body: RequestBody | undefined;
  secured: boolean;
  /** Declares a 201: a success stores what was sent. */
  creates: boolean;
  /** The statuses it documents. */
  documented: string[];
}

const document = contract.dereferenced;
const HTTP_METHODS = ['get', 'put', 'post', 'delete', 'options', 'head', 'patch', 'trace'] as const;

function parameterOf(parameter: OpenAPIV3_1.ParameterObject): Parameter | undefined {
  if (parameter.in !== 'path' && parameter.in !== 'query' && parameter.in !== 'header') return undefined;
  return {
    name: parameter.name,
    in: parameter.in,
    required: parameter.required === true,
    schema: (parameter.schema ?? {}) as Schema,
    opaque: /\bopaque\b/i.test(parameter.description ?? ''),
  };
}

function operationsOf(): Operation[] {
  const found: Operation[] = [];
  for (const [template, item] of Object.entries(document.paths ?? {})) {
    for (const method of HTTP_METHODS) {
      const operation = item?.[method];
      if (operation === undefined) continue;
      const declared = [...(item?.parameters ?? []), ...(operation.parameters ?? [])] as OpenAPIV3_1.ParameterObject[];
      const body = operation.requestBody as OpenAPIV3_1.RequestBodyObject | undefined;
      // Each body comes in one JSON media type (application/json, or a merge patch's).
      const json = Object.values(body?.content ?? {})[0]?.schema;
      found.push({
        id: operation.operationId ?? `${method} ${template}`,
        method: method.toUpperCase(),
        template,
        parameters: declared.map(parameterOf).filter((p): p is Parameter => p !== undefined),
        body:
          body === undefined || json === undefined
            ? undefined
            : { required: body.required === true, mediaTypes: Object.keys(body.content), schema: json },
        secured: (operation.security ?? document.security ?? []).length > 0,
        creates: operation.responses['201'] !== undefined,
        documented: Object.keys(operation.responses),
      });
    }
  }
  return found;
}

export const operations: Operation[] = operationsOf();

/** The HTTP authentication scheme the contract secures operations with (e.g. `bearer`). */
export const authScheme: string = (() => {
  const schemes = Object.values(document.components?.securitySchemes ?? {}) as OpenAPIV3_1.SecuritySchemeObject[];
  const http = schemes.find((scheme): scheme is OpenAPIV3_1.HttpSecurityScheme => scheme.type === 'http');
  if (http === undefined) throw new Error('the contract declares no http security scheme');
  return http.scheme;
})();

/** Every method Node's HTTP parser knows, and the contract's. */
export const httpMethods: string[] = [...new Set([...METHODS, ...operations.map((operation) => operation.method)])];

export const errorSchema = document.components?.schemas?.Error as Schema;

/** Every parameter and body field name in the contract: what a 401 must not reveal. */
export const schemaNames: string[] = [
  ...new Set(
    operations.flatMap((operation) => [
      ...operation.parameters.map((parameter) => parameter.name),
      ...Object.keys(operation.body?.schema.properties ?? {}),
    ]),
  ),
];

// ---------------------------------------------------------------------------------------------
// What the contract accepts

// The contract's schemas, validated with it (validateContract).
const ajv = addFormats.default(new Ajv2020({ strict: false, validateSchema: false }));
const validators = new WeakMap<object, ValidateFunction>();

/** Whether a JSON value satisfies a schema (no coercion, as request bodies are checked). */
export function accepts(schema: Schema, value: unknown): boolean {
  let validate = validators.get(schema);
  if (validate === undefined) {
    validate = ajv.compile(schema);
    validators.set(schema, validate);
  }
  return validate(value);
}

function typeOf(schema: Schema): string | undefined {
  return Array.isArray(schema.type) ? schema.type[0] : schema.type;
}

/** The decisions: query and path integers are canonical decimal integers. */
const CANONICAL_INTEGER = /^-?(0|[1-9][0-9]*)$/;
const DECIMAL_NUMBER = /^-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][-+]?[0-9]+)?$/;

/** Whether a parameter's text (as the server sees it, decoded) is valid for its schema. */
export function parameterAccepts(schema: Schema, text: string): boolean {
  switch (typeOf(schema)) {
    case 'integer':
      return CANONICAL_INTEGER.test(text) && accepts(schema, Number(text));
    case 'number':
      return DECIMAL_NUMBER.test(text) && accepts(schema, Number(text));
    case 'boolean':
      return (text === 'true' || text === 'false') && accepts(schema, text === 'true');
    case 'array': {
      // The contract's arrays are `style: form, explode: false`: comma-separated items.
      const items = text.split(',');
      const itemSchema = schema.items ?? {};
      const numeric = typeOf(itemSchema) === 'integer' || typeOf(itemSchema) === 'number';
      return (
        items.every((item) => parameterAccepts(itemSchema, item)) &&
        accepts(schema, numeric ? items.map(Number) : items)
      );
    }
    default:
      return accepts(schema, text);
  }
}

/** The value with the schema's defaults filled in: what a create should store. */
export function withDefaults(schema: Schema, value: unknown): unknown {
  if (!isObject(value) || schema.properties === undefined) return value;
  const filled: Record<string, unknown> = { ...value };
  for (const [name, property] of Object.entries(schema.properties)) {
    if (!Object.hasOwn(filled, name) && property.default !== undefined) filled[name] = property.default;
  }
  return filled;
}

export function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/** A lone UTF-16 surrogate: not a Unicode scalar value, so not representable in UTF-8. */
const LONE_SURROGATE = /\p{Cs}/u;

/** Every string in a JSON value, keys too; without recursion, as values may nest thousands deep. */
export function* stringsIn(value: unknown): Generator<string> {
  const pending = [value];
  while (pending.length > 0) {
    const item = pending.pop();
    if (typeof item === 'string') yield item;
    else if (Array.isArray(item)) pending.push(...(item as unknown[]));
    else if (isObject(item)) {
      for (const [key, member] of Object.entries(item)) {
        yield key;
        pending.push(member);
      }
    }
  }
}

export function hasLoneSurrogate(value: unknown): boolean {
  for (const text of stringsIn(value)) if (LONE_SURROGATE.test(text)) return true;
  return false;
}

// ---------------------------------------------------------------------------------------------
// Characters and strings

/** Unicode that breaks naive code: controls, invisible and direction marks, BOM, lone surrogates, astral. */
// prettier-ignore
export const HOSTILE_CHARACTERS = [
  '\u0000', '\u0001', '\u0008', '\t', '\n', '\r', ' ', '\u007f', '\u0080', '\u00a0', '\u00ad', '\u00e9', '\u0301',
  '\u200b', '\u200d', '\u202e', '\u2028', '\u2029', '\u3000', '\ufeff', '\ufffd', '\uffff', '\ud800', '\udfff',
  '\u{1f600}', '\u{1d54f}', '\u4e2d', '\u00df', '\u0130', '\ufdfa', '"', '\\', '/', '%', '&', '=', '+', '?', '#',
  '<', '>', "'", '`', '$', '{', '}', ';', ',',
];

const PROTOTYPE_KEYS = [
  '__proto__',
  'constructor',
  'prototype',
  'toString',
  'valueOf',
  'hasOwnProperty',
  '__defineGetter__',
];

const hostileCharacter: fc.Arbitrary<string> = fc.oneof(
  { arbitrary: fc.string({ unit: 'grapheme-ascii', minLength: 1, maxLength: 1 }), weight: 4 },
  { arbitrary: fc.constantFrom(...HOSTILE_CHARACTERS), weight: 3 },
  { arbitrary: fc.string({ unit: 'binary', minLength: 1, maxLength: 1 }), weight: 1 },
);

export function hostileString(maxLength = 40): fc.Arbitrary<string> {
  return fc.string({ unit: hostileCharacter, maxLength });
}

/** `^[class]+$`, `^[class]*$`: a pattern simple enough to generate from its alphabet. */
const SINGLE_CLASS = /^\^\[((?:\\.|[^\]\\])+)\][+*]\$$/;
const CANDIDATES = [...Array.from({ length: 256 }, (_, code) => String.fromCharCode(code)), ...HOSTILE_CHARACTERS];

function characterFor(pattern: string | undefined): fc.Arbitrary<string> {
  const simple = pattern === undefined ? undefined : SINGLE_CLASS.exec(pattern)?.[1];
  if (simple === undefined) return hostileCharacter;
  const one = new RegExp(`^[${simple}]$`, 'u');
  return fc.constantFrom(...new Set(CANDIDATES.filter((character) => one.test(character))));
}

/** Repeats or cuts a string to exactly `length` code points (keeps a single-class pattern valid). */
function resize(text: string, length: number): string {
  const characters = Array.from(text === '' ? 'x' : text);
  return Array.from({ length }, (_, index) => characters[index % characters.length]).join('');
}

// ---------------------------------------------------------------------------------------------
// Valid values, from a schema

const SAFE = Number.MAX_SAFE_INTEGER;

export function validValue(schema: Schema): fc.Arbitrary<unknown> {
  if (schema.enum !== undefined) return fc.constantFrom(...schema.enum);
  switch (typeOf(schema)) {
    case 'integer':
      return validInteger(schema);
    case 'number':
      return fc.double({
        min: schema.minimum ?? -1e308,
        max: schema.maximum ?? 1e308,
        noNaN: true,
        noDefaultInfinity: true,
      });
    case 'boolean':
      return fc.boolean();
    case 'null':
      return fc.constant(null);
    case 'string':
      return validString(schema);
    case 'array': {
      const length = { minLength: schema.minItems ?? 0, maxLength: Math.min(schema.maxItems ?? 5, 5) };
      const items = validValue(schema.items ?? {});
      return schema.uniqueItems === true
        ? fc.uniqueArray(items, { ...length, selector: (item) => JSON.stringify(item) })
        : fc.array(items, length);
    }
    case 'object':
      return validObject(schema);
    default:
      return fc.jsonValue();
  }
}

function validInteger(schema: Schema): fc.Arbitrary<number> {
  const low = Math.ceil(schema.minimum ?? -SAFE);
  const high = Math.floor(schema.maximum ?? SAFE);
  return fc.oneof(fc.constantFrom(low, high), fc.bigInt({ min: BigInt(low), max: BigInt(high) }).map(Number));
}

/**
 * A URL a server may be told to call: on loopback, the only network a test may send to (the
 * fuzzer's server allows it; a port nothing listens on).
 */
const loopbackUrl = fc
  .tuple(fc.constantFrom('http', 'https'), fc.stringMatching(/^[a-z0-9-]{0,20}$/))
  .map(([scheme, path]) => `${scheme}://127.0.0.1:1/${path}`);

function validString(schema: Schema): fc.Arbitrary<string> {
  if (schema.format === 'uri') return loopbackUrl.filter((text) => accepts(schema, text));
  const unit = characterFor(schema.pattern);
  const low = schema.minLength ?? 0;
  const high = Math.max(low, Math.min(schema.maxLength ?? 64, 4096));
  const ofLength = (minLength: number, maxLength: number) => fc.string({ unit, minLength, maxLength });
  return fc
    .oneof({ arbitrary: ofLength(low, high), weight: 4 }, ofLength(low, low), ofLength(high, high))
    .filter((text) => accepts(schema, text));
}

/** The names, with every name they require (`dependentRequired`), transitively. */
function withDependents(schema: Schema, names: string[]): string[] {
  const all = new Set(names);
  for (const name of all) for (const dependent of schema.dependentRequired?.[name] ?? []) all.add(dependent);
  return [...all];
}

/** The required properties and as many optional ones as `minProperties` and `maxProperties` allow. */
function validObject(schema: Schema): fc.Arbitrary<Record<string, unknown>> {
  const properties = schema.properties ?? {};
  const required = withDependents(schema, schema.required ?? []);
  const optional = Object.keys(properties).filter((name) => !required.includes(name));
  const fewest = Math.max((schema.minProperties ?? 0) - required.length, 0);
  const most = Math.min((schema.maxProperties ?? Infinity) - required.length, optional.length);
  if (fewest > most) throw new Error(`no object has the properties this schema requires: ${JSON.stringify(schema)}`);
  return fc
    .subarray(optional, { minLength: fewest, maxLength: most })
    .map((chosen) => withDependents(schema, [...required, ...chosen]))
    .filter((names) => names.length <= (schema.maxProperties ?? Infinity))
    .chain((names) => fc.record(Object.fromEntries(names.map((name) => [name, validValue(properties[name] ?? {})]))));
}

/**
 * The schema keywords validValue honours, and the annotations that constrain nothing. `format` is
 * honoured only as int64, which the bounds of every integer the generator makes satisfy.
 */
const HONOURED = new Set([
  'type',
  'enum',
  'minimum',
  'maximum',
  'minLength',
  'maxLength',
  'pattern',
  'format',
  'items',
  'minItems',
  'maxItems',
  'uniqueItems',
  'properties',
  'required',
  'additionalProperties',
  'minProperties',
  'maxProperties',
  'dependentRequired',
  'description',
  'default',
  'examples',
  'example',
  'title',
  'deprecated',
]);
const HONOURED_FORMATS = new Set(['int64', 'uri']);

/** Where a schema uses a keyword (or format) validValue does not honour: values it makes may be refused. */
export function unhonouredKeywords(schema: Schema, at: string): string[] {
  // `x-` keywords are the contract's annotations (x-transitions): they constrain no value.
  const found = Object.keys(schema)
    .filter((keyword) => !HONOURED.has(keyword) && !keyword.startsWith('x-'))
    .map((keyword) => `${at}/${keyword}`);
  if (schema.format !== undefined && !HONOURED_FORMATS.has(schema.format)) found.push(`${at}/format: ${schema.format}`);
  const children: [string, Schema][] = [
    ...Object.entries(schema.properties ?? {}).map(([name, child]): [string, Schema] => [`properties/${name}`, child]),
    ...(schema.items === undefined ? [] : [['items', schema.items] as [string, Schema]]),
  ];
  return [...found, ...children.flatMap(([where, child]) => unhonouredKeywords(child, `${at}/${where}`))];
}

/** JSON text; `null` for undefined, which JSON cannot say. */
export function toJson(value: unknown): string {
  return value === undefined ? 'null' : JSON.stringify(value);
}

/** A parameter's value as text (how a query, path or header carries it). */
function asText(value: unknown): string {
  if (Array.isArray(value)) return value.map(asText).join(',');
  return typeof value === 'string' ? value : toJson(value);
}

// ---------------------------------------------------------------------------------------------
// Invalid values, from a schema

/** Nesting as deep as `depth`, of arrays or objects. */
export const deeplyNested: fc.Arbitrary<unknown> = fc
  .tuple(fc.integer({ min: 2, max: 3000 }), fc.boolean())
  .map(([depth, arrays]) => {
    let value: unknown = 1;
    for (let level = 0; level < depth; level += 1) value = arrays ? [value] : { a: value };
    return value;
  });

/** Objects keyed by names that reach Object.prototype when code is careless. */
const prototypeKeyed: fc.Arbitrary<Record<string, unknown>> = fc
  .tuple(fc.constantFrom(...PROTOTYPE_KEYS), fc.jsonValue({ maxDepth: 2 }))
  .map(([key, value]) => ({ [key]: value }));

/** Values of every JSON type, for a schema that wants one: the wrong ones survive the filter. */
function wrongType(schema: Schema): fc.Arbitrary<unknown> {
  const valid = validValue(schema);
  return fc.oneof(
    fc.constantFrom(null, true, false, 0, -0, 0.5, -1, 1e308, -1e308, Number.MIN_VALUE, '', [], {}),
    valid.map((value) => asText(value)),
    valid.map((value) => [value]),
    valid.map((value) => ({ value })),
    fc.double({ noNaN: true, noDefaultInfinity: true }),
    hostileString(),
    prototypeKeyed,
    deeplyNested,
  );
}

/** Just past each bound the schema sets. */
function outOfBounds(schema: Schema): fc.Arbitrary<unknown> {
  const numbers: number[] = [2 ** 53, 2 ** 53 + 2, 2 ** 63, -(2 ** 53)];
  for (const bound of [schema.minimum, schema.maximum]) {
    if (bound !== undefined) numbers.push(bound - 1, bound + 1, bound - 0.5, bound + 0.5, bound * 2, -bound);
  }
  const arms: fc.Arbitrary<unknown>[] = [fc.constantFrom(...numbers)];
  if (typeOf(schema) === 'string' || schema.enum !== undefined) {
    const valid = validValue(schema).map(asText);
    const low = schema.minLength ?? 0;
    const high = schema.maxLength;
    arms.push(
      valid.map((text) => resize(text, Math.max(low - 1, 0))),
      valid.map((text) => resize(text, (high ?? 100) + 1)),
      fc.integer({ min: 1, max: 20_000 }).map((length) => 'x'.repeat(length)),
      fc.string({
        unit: fc.constantFrom(' ', '\t', '\n', '\u00a0', '\u2028', '\u3000', '\ufeff'),
        minLength: 1,
        maxLength: 5,
      }),
      fc.tuple(valid, hostileCharacter, fc.nat()).map(([text, character, at]) => {
        const characters = Array.from(text);
        characters.splice(at % (characters.length + 1), 0, character);
        return characters.join('');
      }),
      valid.map((text) => text.toUpperCase()),
      valid.map((text) => `${text.charAt(0).toUpperCase()}${text.slice(1)}`),
      valid.map((text) => ` ${text}`),
      valid.map((text) => `${text}\u0000`),
      valid.map((text) => text.slice(0, -1)),
    );
  }
  return fc.oneof(...arms);
}

/** A JSON value the schema rejects: a wrong type, a value past a bound, anything. */
export function invalidValue(schema: Schema): fc.Arbitrary<unknown> {
  return fc
    .oneof(wrongType(schema), outOfBounds(schema), fc.jsonValue({ maxDepth: 3 }))
    .filter((value) => !accepts(schema, JSON.parse(toJson(value))));
}

/** Spellings of a valid integer that are not canonical: `+1`, `01`, `1.0`, `1e0`, ` 1`, `0x1`, `١`. */
function nonCanonicalInteger(schema: Schema): fc.Arbitrary<string> {
  const toDigits = (text: string, zero: number) =>
    text.replace(/[0-9]/g, (digit) => String.fromCodePoint(zero + Number(digit)));
  return fc.tuple(validValue(schema), fc.nat()).map(([value, choice]) => {
    const n = Number(value);
    // prettier-ignore
    const forms = [
      `+${n}`, `0${n}`, `00${n}`, `${n}.0`, `${n}e0`, `${n}E+0`, ` ${n}`, `${n} `, `\t${n}`, `${n}\n`, `0x${n.toString(16)}`,
      `${n}n`, `${n}_`, `1_${n}`, `${n},0`, `-${n}`, `--${n}`, `${n}\u0000`, toDigits(String(n), 0xff10), toDigits(String(n), 0x0660),
      `${n}${'0'.repeat(20)}`, '9'.repeat(400), 'NaN', 'Infinity', '-Infinity', 'null', 'true', '[]', '{}', '',
    ];
    return forms[choice % forms.length] ?? '';
  });
}

/** Text a parameter rejects. */
export function invalidText(schema: Schema): fc.Arbitrary<string> {
  const arms: fc.Arbitrary<string>[] = [
    invalidValue(schema).map(asText),
    hostileString(),
    fc.integer({ min: 1, max: 8000 }).map((n) => 'x'.repeat(n)),
  ];
  if (typeOf(schema) === 'integer' || typeOf(schema) === 'number') arms.push(nonCanonicalInteger(schema));
  return fc.oneof(...arms).filter((text) => !LONE_SURROGATE.test(text) && !parameterAccepts(schema, text));
}

// ---------------------------------------------------------------------------------------------
// Drafts: requests in parts

export interface Rejection {
  status: number;
  /** What the Error message must start with (it names the offending part). */
  message?: RegExp;
}

export interface Fault {
  what: string;
  /** The contract does not settle it: the request may also succeed. */
  mayBeAccepted?: boolean;
  rejections: Rejection[];
}

export interface Draft {
  operation: Operation;
  /** Path parameters as they go on the wire (percent-encoded). */
  path: Record<string, string>;
  /** `name=value` pieces of the query string, as they go on the wire. */
  query: string[];
  /** Lower-case names. */
  headers: Record<string, string>;
  body: string | Buffer | undefined;
  /** The JSON value the body encodes, when it is JSON. */
  sent: unknown;
  faults: Fault[];
}

const MESSAGE_PART: Record<Location, string> = { path: 'params', query: 'query', header: 'headers' };

function escapeRegExp(text: string): string {
  return text.replace(/[.*+?^${}()|[\]\\/]/g, '\\$&');
}

/** The Error message for a bad parameter starts with `query/limit`, `params/petId`, `headers/idempotency-key`. */
export function blames(parameter: Parameter): RegExp {
  return new RegExp(`^${MESSAGE_PART[parameter.in]}/${escapeRegExp(parameter.name)}\\b`, 'i');
}

const BODY_BLAME = /^body\b/i;

export function url(draft: Draft): string {
  const path = draft.operation.template.replace(/\{([^}]+)\}/g, (_, name: string) => draft.path[name] ?? '');
  return `${contract.basePath}${path}${draft.query.length > 0 ? `?${draft.query.join('&')}` : ''}`;
}

export function describe(draft: Draft, authorization?: string, key?: string): string {
  const redact = (text: string) => (key === undefined ? text : text.split(key).join('<key>'));
  const headers = { ...draft.headers, ...(authorization === undefined ? {} : { authorization }) };
  const body =
    draft.body === undefined
      ? ''
      : typeof draft.body === 'string' || isUtf8(draft.body)
        ? ` body ${JSON.stringify(abbreviate(draft.body.toString()))}`
        : ` body bytes ${abbreviate(draft.body.toString('hex'))}`;
  const faults = draft.faults.length === 0 ? 'valid' : draft.faults.map((fault) => fault.what).join('; ');
  return printable(
    redact(`${draft.operation.method} ${abbreviate(url(draft))} headers ${JSON.stringify(headers)}${body} [${faults}]`),
  );
}

/** ASCII only (other characters as \u escapes): safe in TAP output and logs. */
export function printable(text: string): string {
  return text.replace(/[^\x20-\x7e]/g, (unit) => `\\u${unit.charCodeAt(0).toString(16).padStart(4, '0')}`);
}

function abbreviate(text: string, length = 300): string {
  return text.length <= length ? text : `${text.slice(0, length)}… (${text.length} characters)`;
}

/** Prints as the request in fast-check's counterexamples. */
function sealed(draft: Draft): Draft {
  return Object.defineProperty(draft, fc.toStringMethod, { value: () => describe(draft), enumerable: false });
}

// ---------------------------------------------------------------------------------------------
// Valid requests

/** Percent-encodes text minimally, or every byte (upper- or lower-case hex): the same value either way. */
const encodings: fc.Arbitrary<(text: string) => string> = fc.constantFrom(
  encodeURIComponent,
  (text: string) =>
    [...Buffer.from(text)].map((byte) => `%${byte.toString(16).padStart(2, '0').toUpperCase()}`).join(''),
  (text: string) => [...Buffer.from(text)].map((byte) => `%${byte.toString(16).padStart(2, '0')}`).join(''),
);

const HEADER_VALUE = /^[\x21-\x7e\x80-\xff]([\x20-\x7e\x80-\xff]*[\x21-\x7e\x80-\xff])?$/;

function validText(parameter: Parameter): fc.Arbitrary<string> {
  // A header carries Latin-1 without surrounding white space (Node trims it); a URL, well-formed Unicode.
  const carried = (text: string) => (parameter.in === 'header' ? HEADER_VALUE.test(text) : !LONE_SURROGATE.test(text));
  return validValue(parameter.schema)
    .map(asText)
    .filter((text) => carried(text) && parameterAccepts(parameter.schema, text));
}

/** A parameter as it goes on the wire: a path segment, a `name=value` piece, or a header value. */
function onWire(parameter: Parameter, text: fc.Arbitrary<string>): fc.Arbitrary<string> {
  if (parameter.in === 'header') return text;
  return fc
    .tuple(text, encodings)
    .map(([value, encode]) =>
      parameter.in === 'query' ? `${encodeURIComponent(parameter.name)}=${encode(value)}` : encode(value),
    );
}

/** Media types meaning the same as the declared one. */
function mediaTypeVariants(type: string): string[] {
  return [type, type.toUpperCase(), `${type}; charset=utf-8`, `${type};charset=UTF-8`];
}

function validBody(body: RequestBody) {
  return fc.record({
    value: validValue(body.schema),
    contentType: fc.constantFrom(...body.mediaTypes.flatMap(mediaTypeVariants)),
    indent: fc.constantFrom(0, 2, '\t'),
  });
}

function assemble(operation: Operation, present: [Parameter, string][]): Draft {
  const draft: Draft = { operation, path: {}, query: [], headers: {}, body: undefined, sent: undefined, faults: [] };
  for (const [parameter, wire] of present) setParameter(draft, parameter, [wire]);
  return draft;
}

export function validRequest(operation: Operation): fc.Arbitrary<Draft> {
  const parameters = operation.parameters.map((parameter) => {
    const wire = onWire(parameter, validText(parameter)).map((value): [Parameter, string] => [parameter, value]);
    if (parameter.required) return wire;
    // A random opaque value is a 400 (the server did not issue it): send one only now and then.
    return parameter.opaque
      ? fc.oneof({ arbitrary: fc.constant(undefined), weight: 5 }, wire)
      : fc.option(wire, { nil: undefined });
  });
  const body = operation.body === undefined ? fc.constant(undefined) : validBody(operation.body);
  return fc.tuple(fc.tuple(...parameters), body).map(([present, content]) => {
    const draft = assemble(
      operation,
      present.filter((entry): entry is [Parameter, string] => entry !== undefined),
    );
    if (content !== undefined) {
      draft.headers['content-type'] = content.contentType;
      setBody(
        draft,
        JSON.stringify(content.value, null, content.indent === 0 ? undefined : content.indent),
        content.value,
      );
    }
    return sealed(draft);
  });
}

// ---------------------------------------------------------------------------------------------
// Mutations: each breaks one part of a valid request

type Mutate = (draft: Draft) => Draft;

function copy(draft: Draft): Draft {
  return {
    ...draft,
    path: { ...draft.path },
    query: [...draft.query],
    headers: { ...draft.headers },
    faults: [...draft.faults],
  };
}

/** Sets a parameter to these wire values (several: a repeated query parameter), or removes it. */
function setParameter(draft: Draft, parameter: Parameter, wires: string[] | undefined): void {
  if (parameter.in === 'path') draft.path[parameter.name] = wires?.[0] ?? '';
  if (parameter.in === 'header') {
    const header = parameter.name.toLowerCase();
    draft.headers = Object.fromEntries(Object.entries(draft.headers).filter(([name]) => name !== header));
    if (wires !== undefined) draft.headers[header] = wires[0] ?? '';
  }
  if (parameter.in === 'query') {
    const name = encodeURIComponent(parameter.name);
    draft.query = [...draft.query.filter((piece) => piece.split('=', 1)[0] !== name), ...(wires ?? [])];
  }
}

function setBody(draft: Draft, body: string | Buffer | undefined, sent: unknown): void {
  draft.body = body;
  draft.sent = sent;
}

function mutation(what: (draft: Draft) => Fault | undefined, change: (draft: Draft) => void): Mutate {
  return (original) => {
    const draft = copy(original);
    change(draft);
    const fault = what(draft);
    if (fault !== undefined) draft.faults.push(fault);
    return sealed(draft);
  };
}

function parameterFault(parameter: Parameter, what: string, interpretations: string[]): Fault | undefined {
  const accepted = interpretations.filter((text) => parameterAccepts(parameter.schema, text)).length;
  if (accepted === interpretations.length) return undefined;
  const rejections = [{ status: 400, message: blames(parameter) }];
  // A path that cannot be decoded is refused before routing.
  if (parameter.in === 'path') rejections.push({ status: 400, message: /^Malformed request/ });
  // An empty path segment names no resource: answered as a path nothing is served on.
  if (parameter.in === 'path' && interpretations.includes('')) rejections.push({ status: 404, message: /^No route/ });
  return { what: `${parameter.in} ${parameter.name}: ${what}`, mayBeAccepted: accepted > 0, rejections };
}

/** Malformed percent-encoding and encoded bytes that are not UTF-8. */
// prettier-ignore
const PERCENT_GARBAGE = ['%', '%%', '%z', '%zz', '%G0', '%2', '%FF', '%C3%28', '%E0%A4%A', '%ED%A0%80', '%F4%90%80%80', '%C0%AF', '%00', '%0A'];

/** How a lenient decoder reads percent-encoding: valid escapes as UTF-8 (with U+FFFD), the rest literally. */
function lenientDecode(wire: string): string {
  const bytes: number[] = [];
  for (let index = 0; index < wire.length; index += 1) {
    const escape = /^%[0-9a-f]{2}/i.exec(wire.slice(index))?.[0];
    if (escape !== undefined) {
      bytes.push(parseInt(escape.slice(1), 16));
      index += 2;
    } else bytes.push(...Buffer.from(wire.charAt(index)));
  }
  return Buffer.from(bytes).toString('utf8');
}

function parameterMutations(parameter: Parameter): fc.Arbitrary<Mutate>[] {
  const name = encodeURIComponent(parameter.name);
  const wireOf = (text: string) => (parameter.in === 'header' ? text : encodeURIComponent(text));
  const pieceOf = (wire: string) => (parameter.in === 'query' ? `${name}=${wire}` : wire);
  const arms: fc.Arbitrary<Mutate>[] = [
    invalidText(parameter.schema).map((text) =>
      mutation(
        () => parameterFault(parameter, JSON.stringify(abbreviate(text, 60)), [text]),
        (draft) => setParameter(draft, parameter, [pieceOf(wireOf(text))]),
      ),
    ),
  ];
  if (parameter.in !== 'header') {
    arms.push(
      fc
        .tuple(validText(parameter), fc.constantFrom(...PERCENT_GARBAGE), fc.boolean())
        .map(([text, garbage, first]) => {
          const wire = first ? `${garbage}${encodeURIComponent(text)}` : `${encodeURIComponent(text)}${garbage}`;
          return mutation(
            () => parameterFault(parameter, `bad percent-encoding ${wire}`, [wire, lenientDecode(wire)]),
            (draft) => setParameter(draft, parameter, [pieceOf(wire)]),
          );
        }),
    );
  }
  if (parameter.in === 'query' && typeOf(parameter.schema) !== 'array') {
    arms.push(
      fc.tuple(validText(parameter), validText(parameter)).map(([one, other]) =>
        mutation(
          () => ({
            what: `query ${parameter.name} repeated`,
            rejections: [{ status: 400, message: blames(parameter) }],
          }),
          (draft) =>
            setParameter(draft, parameter, [pieceOf(encodeURIComponent(one)), pieceOf(encodeURIComponent(other))]),
        ),
      ),
      fc.constant(
        mutation(
          () => parameterFault(parameter, 'a name without =', ['']),
          (draft) => setParameter(draft, parameter, [name]),
        ),
      ),
    );
  }
  if (parameter.required && parameter.in !== 'path') {
    arms.push(
      fc.constant(
        mutation(
          () => ({
            what: `${parameter.in} ${parameter.name} missing`,
            rejections: [{ status: 400, message: blames(parameter) }],
          }),
          (draft) => setParameter(draft, parameter, undefined),
        ),
      ),
    );
  }
  return arms;
}

/** A query parameter the operation does not declare: the contract does not say whether that is an error. */
function unknownQueryParameter(operation: Operation): fc.Arbitrary<Mutate> {
  const known = new Set(operation.parameters.filter((p) => p.in === 'query').map((p) => p.name));
  const names = fc
    .oneof(fc.constantFrom(...PROTOTYPE_KEYS), hostileString(20))
    .filter((name) => !known.has(name) && !LONE_SURROGATE.test(name));
  const values = hostileString().filter((value) => !LONE_SURROGATE.test(value));
  return fc.tuple(names, values).map(([name, value]) =>
    mutation(
      () => ({
        what: `unknown query parameter ${JSON.stringify(name)}`,
        mayBeAccepted: true,
        rejections: [{ status: 400, message: /^query\b/ }],
      }),
      (draft) => draft.query.push(`${encodeURIComponent(name)}=${encodeURIComponent(value)}`),
    ),
  );
}

// Bodies

/** The fault of a body, whatever its bytes: not UTF-8, not JSON, or JSON the schema rejects. */
function bodyFault(body: RequestBody, bytes: string | Buffer | undefined, what: string): Fault | undefined {
  const rejected = [{ status: 400, message: BODY_BLAME }];
  if (bytes === undefined) return { what, rejections: [...rejected, { status: 415 }] };
  const buffer = Buffer.from(bytes);
  if (!isUtf8(buffer)) return { what, rejections: rejected };
  const text = buffer.toString('utf8');
  const withMark = text.startsWith('\ufeff');
  const value = parse(withMark ? text.slice(1) : text);
  if (value === undefined || !accepts(body.schema, value)) return { what, rejections: rejected };
  // RFC 8259 8.1: a parser MAY ignore a byte order mark.
  return withMark ? { what, mayBeAccepted: true, rejections: rejected } : undefined;
}

function parse(text: string): unknown {
  try {
    return JSON.parse(text) as unknown;
  } catch {
    return undefined;
  }
}

function bodyMutation(
  body: RequestBody,
  what: string,
  make: (draft: Draft) => string | Buffer | undefined,
  extra?: Fault,
): Mutate {
  return mutation(
    (draft) => extra ?? bodyFault(body, draft.body, what),
    (draft) => {
      const bytes = make(draft);
      // What the server stores if it accepts: the JSON after a byte order mark, if any.
      setBody(
        draft,
        bytes,
        bytes === undefined
          ? undefined
          : parse(
              Buffer.from(bytes)
                .toString('utf8')
                .replace(/^\ufeff/, ''),
            ),
      );
    },
  );
}

function withKey(value: unknown, key: string, item: unknown): Record<string, unknown> {
  // A computed key defines an own property, even for __proto__.
  return { ...(isObject(value) ? value : {}), [key]: item };
}

/** JSON values the schema rejects: one field broken, one missing, one added, or the whole body. */
function bodyValueMutations(body: RequestBody): fc.Arbitrary<Mutate>[] {
  const properties = body.schema.properties ?? {};
  const unknownKey = fc
    .oneof(fc.constantFrom(...PROTOTYPE_KEYS), hostileString(20))
    .filter((key) => !Object.hasOwn(properties, key));
  return [
    ...Object.entries(properties).map(([name, property]) =>
      invalidValue(property).map((item) =>
        bodyMutation(body, `body ${name} = ${abbreviate(toJson(item), 60)}`, (draft) =>
          toJson(withKey(draft.sent, name, item)),
        ),
      ),
    ),
    ...(body.schema.required ?? []).map((name) =>
      fc.constant(
        bodyMutation(body, `body without ${name}`, (draft) => {
          const fields = Object.entries(isObject(draft.sent) ? draft.sent : {});
          return toJson(Object.fromEntries(fields.filter(([field]) => field !== name)));
        }),
      ),
    ),
    fc
      .tuple(unknownKey, fc.oneof(fc.jsonValue({ maxDepth: 2 }), deeplyNested))
      .map(([key, item]) =>
        bodyMutation(body, `body with an extra field ${JSON.stringify(key)}`, (draft) =>
          toJson(withKey(draft.sent, key, item)),
        ),
      ),
    invalidValue(body.schema).map((value) =>
      bodyMutation(body, `body ${abbreviate(toJson(value), 60)}`, () => toJson(value)),
    ),
  ];
}

/** Byte sequences that are not UTF-8: stray continuation, overlong, truncated, surrogate, past U+10FFFF. */
// prettier-ignore
export const INVALID_UTF8: number[][] = [[0xff], [0xfe], [0x80], [0xc0, 0x80], [0xc3], [0xe2, 0x82], [0xed, 0xa0, 0x80], [0xf4, 0x90, 0x80, 0x80], [0xf8, 0x88, 0x80, 0x80, 0x80]];

function insertBytes(text: string, at: number, bytes: number[]): Buffer {
  const buffer = Buffer.from(text);
  return Buffer.concat([buffer.subarray(0, at), Buffer.from(bytes), buffer.subarray(at)]);
}

/** Positions just inside each string of a JSON text (after a quote). */
function stringStarts(text: string): number[] {
  const positions: number[] = [];
  for (let index = 0; index < text.length; index += 1)
    if (text[index] === '"') positions.push(Buffer.byteLength(text.slice(0, index + 1)));
  return positions.length === 0 ? [0] : positions;
}

/** A JSON string or a JSON number: matching both is how digits inside a string (a URL's port) are skipped. */
const JSON_STRING_OR_NUMBER = /"(?:[^"\\]|\\[^])*"|-?[0-9][0-9.eE+-]*/g;

/** Rewrites the first number of a JSON text, if it has one; never digits inside a string. */
export function rewriteFirstNumber(source: string, rewrite: (number: string) => string): string {
  let rewritten = false;
  return source.replace(JSON_STRING_OR_NUMBER, (token) => {
    if (rewritten || token.startsWith('"')) return token;
    rewritten = true;
    return rewrite(token);
  });
}

/** Breaks the text of a valid body: truncated, trailing garbage, bad UTF-8, duplicate keys, JavaScript-isms, padding. */
function bodyTextMutations(body: RequestBody, bodyLimit: number): fc.Arbitrary<Mutate>[] {
  const text = (draft: Draft) => (draft.body === undefined ? '' : draft.body.toString());
  const rewrites: [string, (source: string) => string][] = [
    ['NaN for a number', (source) => rewriteFirstNumber(source, () => 'NaN')],
    ['Infinity for a number', (source) => rewriteFirstNumber(source, () => '-Infinity')],
    ['a hexadecimal number', (source) => rewriteFirstNumber(source, (number) => number.replace(/[0-9]+/, '0x$&'))],
    ['single quotes', (source) => source.replace(/"/g, "'")],
    ['a trailing comma', (source) => source.replace(/\}\s*$/, ',}')],
    ['a comment', (source) => `/* a comment */${source}`],
    ['an unquoted key', (source) => source.replace(/"([A-Za-z_]\w*)":/, '$1:')],
    ['a byte order mark', (source) => `\ufeff${source}`],
    ['only white space', () => ' \n\t '],
    ['empty', () => ''],
  ];
  return [
    fc
      .nat()
      .map((cut) =>
        bodyMutation(body, 'truncated', (draft) => text(draft).slice(0, cut % Math.max(text(draft).length, 1))),
      ),
    fc
      .constantFrom('x', '}', ',', '\u0000', '{}', ' //', ']', '"')
      .map((garbage) =>
        bodyMutation(body, `trailing ${JSON.stringify(garbage)}`, (draft) => `${text(draft)}${garbage}`),
      ),
    fc.tuple(fc.nat(), fc.constantFrom(...INVALID_UTF8)).map(([at, bytes]) =>
      bodyMutation(body, `bytes ${Buffer.from(bytes).toString('hex')} that are not UTF-8`, (draft) => {
        const starts = stringStarts(text(draft));
        return insertBytes(text(draft), starts[at % starts.length] ?? 0, bytes);
      }),
    ),
    fc.constantFrom(...rewrites).map(([what, rewrite]) => bodyMutation(body, what, (draft) => rewrite(text(draft)))),
    fc.tuple(fc.nat(), fc.oneof(fc.jsonValue({ maxDepth: 1 }), fc.constant(undefined))).map(([pick, other]) =>
      bodyMutation(
        body,
        'a duplicate key',
        (draft) => {
          const keys = Object.keys(isObject(draft.sent) ? draft.sent : {});
          const key = keys[pick % Math.max(keys.length, 1)] ?? 'x';
          const first = other === undefined ? (draft.sent as Record<string, unknown>)[key] : other;
          return `{${JSON.stringify(key)}:${toJson(first)},${text(draft).replace(/^\s*\{/, '')}`;
        },
        { what: 'a duplicate key', rejections: [{ status: 400, message: BODY_BLAME }] },
      ),
    ),
    // Valid JSON padded with white space to just under, at or just over the limit: only the size counts.
    fc
      .integer({ min: -8, max: 8 })
      .map((delta) =>
        bodyMutation(
          body,
          `padded to ${bodyLimit + delta} bytes`,
          (draft) => `${text(draft)}${' '.repeat(Math.max(0, bodyLimit + delta - Buffer.byteLength(text(draft))))}`,
        ),
      ),
    fc.constant(bodyMutation(body, 'no body', () => undefined)),
  ];
}

/** Media types other than the declared ones (415), and odd spellings of the declared ones. */
function mediaTypeMutations(body: RequestBody): fc.Arbitrary<Mutate> {
  const declared = body.mediaTypes.map((type) => type.toLowerCase());
  const lookalikes = (type: string) => [
    `${type}x`,
    `x${type}`,
    `${type}/x`,
    `${type}, text/plain`,
    `${type}\u0000`,
    ` ${type}`,
    `${type};`,
    `${type}; charset=utf-16`,
    `${type}; charset=latin1`,
    `${type}; charset=`,
    `${type}; boundary=x`,
  ];
  const others = [
    'text/plain',
    'text/json',
    'application/x-www-form-urlencoded',
    'multipart/form-data; boundary=x',
    'application/xml',
    'application/octet-stream',
    '*/*',
    'application/*',
    'application/json-seq',
  ];
  const contentType = fc.oneof(
    fc.constantFrom(...others, ...declared.flatMap(lookalikes)),
    hostileString(30),
    fc.constant(undefined),
  );
  return contentType.map((type) =>
    mutation(
      () => {
        const what = `content-type ${JSON.stringify(type)}`;
        if (type === undefined) return { what, rejections: [{ status: 415 }] };
        const [essence = '', ...parameters] = type.split(';');
        if (!declared.includes(essence.trim().toLowerCase())) return { what, rejections: [{ status: 415 }] };
        const charsets = parameters.map((parameter) => /^\s*charset\s*=\s*(.*?)\s*$/i.exec(parameter)?.[1]);
        // Bodies are UTF-8 (RFC 8259): another charset is a 415.
        const otherCharset = charsets.some((charset) => charset !== undefined && charset.toLowerCase() !== 'utf-8');
        if (otherCharset) return { what, rejections: [{ status: 415 }] };
        const exact =
          essence === essence.trim() && parameters.every((parameter) => /^\s*charset=utf-8\s*$/i.test(parameter));
        // The contract allows a charset parameter; it says nothing of other parameters.
        return exact
          ? undefined
          : { what, mayBeAccepted: true, rejections: [{ status: 415 }, { status: 400, message: BODY_BLAME }] };
      },
      (draft) => {
        if (type === undefined) delete draft.headers['content-type'];
        else draft.headers['content-type'] = type;
      },
    ),
  );
}

/** A request to `operation` with exactly one part broken (or, where the contract is silent, perhaps not). */
export function mutatedRequest(operation: Operation, bodyLimit: number): fc.Arbitrary<Draft> {
  const mutations = [
    ...operation.parameters.flatMap(parameterMutations),
    unknownQueryParameter(operation),
    ...(operation.body === undefined
      ? []
      : [
          ...bodyValueMutations(operation.body),
          ...bodyTextMutations(operation.body, bodyLimit),
          mediaTypeMutations(operation.body),
        ]),
  ];
  return fc.tuple(validRequest(operation), fc.oneof(...mutations)).map(([draft, mutate]) => mutate(draft));
}

// ---------------------------------------------------------------------------------------------
// Authorization

function anyCase(text: string): fc.Arbitrary<string> {
  return fc.array(fc.boolean(), { minLength: text.length, maxLength: text.length }).map((upper) =>
    Array.from(text)
      .map((character, index) => (upper[index] === true ? character.toUpperCase() : character.toLowerCase()))
      .join(''),
  );
}

/** The contract's scheme in any case, one or more spaces, the key, perhaps trailing spaces. */
export function validAuthorization(key: string): fc.Arbitrary<string> {
  return fc
    .tuple(anyCase(authScheme), fc.integer({ min: 1, max: 3 }), fc.integer({ min: 0, max: 2 }))
    .map(([scheme, spaces, trailing]) => `${scheme}${' '.repeat(spaces)}${key}${' '.repeat(trailing)}`);
}

export function isValidAuthorization(value: string | undefined, key: string): boolean {
  const match = value === undefined ? null : /^(\S+) +(\S+) *$/.exec(value);
  return match !== null && match[1]?.toLowerCase() === authScheme.toLowerCase() && match[2] === key;
}

/** Missing, empty, another scheme, no scheme, a key off by a character, garbage, huge. */
export function invalidAuthorization(key: string): fc.Arbitrary<string | undefined> {
  const scheme = fc.constantFrom(authScheme, authScheme.toUpperCase());
  const alphabet = fc.constantFrom(...new Set(key));
  const keyShaped = fc
    .string({ unit: alphabet, minLength: key.length, maxLength: key.length })
    .map((random) => `${key.slice(0, key.indexOf('_') + 1)}${random.slice(key.indexOf('_') + 1)}`);
  const mangled = fc
    .tuple(fc.nat(), hostileCharacter, fc.constantFrom('replace', 'insert', 'cut', 'case'))
    .map(([at, character, how]) => {
      const index = at % key.length;
      if (how === 'cut') return key.slice(0, index);
      if (how === 'case')
        return key.replace(/[a-z]/gi, (letter) =>
          letter === letter.toUpperCase() ? letter.toLowerCase() : letter.toUpperCase(),
        );
      return `${key.slice(0, index)}${character}${key.slice(how === 'replace' ? index + 1 : index)}`;
    });
  return fc
    .oneof(
      fc.constantFrom(undefined, '', ' ', authScheme, `${authScheme} `, key),
      fc
        .tuple(
          fc.constantFrom('Basic', 'Token', 'Digest', 'ApiKey', `${authScheme}x`, `x${authScheme}`, `${authScheme}:`),
          fc.constant(key),
        )
        .map(([other, token]) => `${other} ${token}`),
      fc.tuple(scheme, fc.oneof(mangled, keyShaped, hostileString(60))).map(([name, token]) => `${name} ${token}`),
      fc.tuple(scheme, fc.constantFrom('\t', '', ':', '  \t')).map(([name, separator]) => `${name}${separator}${key}`),
      fc.constantFrom(
        `${authScheme} ${key}, ${authScheme} ${key}`,
        `${authScheme} ${key} x`,
        `${authScheme} ${key}\u0000`,
        `${authScheme} ${'A'.repeat(10_000)}`,
      ),
      hostileString(80),
    )
    .filter((value) => !isValidAuthorization(value, key));
}

export function toInject(draft: Draft, authorization: string | undefined) {
  return {
    method: draft.operation.method,
    url: url(draft),
    headers: { ...draft.headers, ...(authorization === undefined ? {} : { authorization }) },
    ...(draft.body === undefined ? {} : { payload: draft.body }),
  };
}

// ---------------------------------------------------------------------------------------------
// Routes the contract does not have

function templatePaths(): fc.Arbitrary<string> {
  return fc.oneof(
    ...operations.map((operation) => validRequest(operation).map((draft) => url({ ...draft, query: [] }))),
  );
}

const segment = hostileString(12)
  .filter((text) => !LONE_SURROGATE.test(text))
  .map(encodeURIComponent)
  .filter((text) => text !== '.' && text !== '..');

/** The contract's paths, paths near them (a segment changed, added, dropped, re-cased, a doubled slash), random ones. */
export const nearbyPath: fc.Arbitrary<string> = fc.oneof(
  templatePaths(),
  fc
    .tuple(
      templatePaths(),
      fc.nat(),
      segment,
      fc.constantFrom('replace', 'insert', 'drop', 'case', 'slash', 'trailing'),
    )
    .map(([path, at, text, how]) => {
      const segments = path.split('/');
      const index = 1 + (at % (segments.length - 1));
      if (how === 'replace') segments[index] = text;
      if (how === 'insert') segments.splice(index, 0, text);
      if (how === 'drop') segments.splice(index, 1);
      if (how === 'case') segments[index] = (segments[index] ?? '').toUpperCase();
      if (how === 'slash') segments.splice(index, 0, '');
      if (how === 'trailing') segments.push('');
      return segments.join('/') || '/';
    }),
  fc.array(segment, { maxLength: 4 }).map((segments) => `/${segments.join('/')}`),
);

export const anyMethod: fc.Arbitrary<string> = fc.constantFrom(...httpMethods);

/** A body a route without an operation may still be sent. */
export function junkBody(bodyLimit: number): fc.Arbitrary<{ contentType: string; payload: string } | undefined> {
  return fc.option(
    fc.record({
      contentType: fc.constantFrom('application/json', 'text/plain', 'application/x-www-form-urlencoded'),
      payload: fc.oneof(
        fc.jsonValue({ maxDepth: 2 }).map(toJson),
        fc.constantFrom('{', '{"__proto__":{"x":1}}', '', 'x'.repeat(bodyLimit + 1)),
      ),
    }),
    { nil: undefined },
  );
}

// ---------------------------------------------------------------------------------------------
// Raw HTTP: what inject cannot send

export interface RawRequest {
  method: string;
  target: Buffer;
  version: string;
  headers: [string, Buffer][];
  body: Buffer;
  /** Line ending (CRLF, or a bare LF). */
  eol: string;
}

export interface RawMutation {
  what: string;
  /** HTTP leaves it to the server (RFC 9112 allows lenient parsing): the request may also succeed. */
  mayBeAccepted: boolean;
  apply(request: RawRequest): RawRequest;
}

export function rawFrom(draft: Draft, authorization: string): RawRequest {
  const body = draft.body === undefined ? Buffer.alloc(0) : Buffer.from(draft.body);
  const headers: [string, Buffer][] = [
    ['Host', Buffer.from('127.0.0.1')],
    ['Connection', Buffer.from('close')],
    ['Authorization', Buffer.from(authorization, 'latin1')],
    ...Object.entries(draft.headers).map(([name, value]): [string, Buffer] => [name, Buffer.from(value, 'latin1')]),
    ...(draft.body === undefined ? [] : [['Content-Length', Buffer.from(String(body.length))] as [string, Buffer]]),
  ];
  return {
    method: draft.operation.method,
    target: Buffer.from(url(draft), 'latin1'),
    version: 'HTTP/1.1',
    headers,
    body,
    eol: '\r\n',
  };
}

export function serialize(request: RawRequest): Buffer {
  const { eol } = request;
  return Buffer.concat([
    Buffer.from(`${request.method} `),
    request.target,
    Buffer.from(` ${request.version}${eol}`),
    ...request.headers.flatMap(([name, value]) => [Buffer.from(`${name}: `), value, Buffer.from(eol)]),
    Buffer.from(eol),
    request.body,
  ]);
}

function insertAt(buffer: Buffer, at: number, bytes: number[] | Buffer): Buffer {
  return Buffer.concat([buffer.subarray(0, at), Buffer.from(bytes), buffer.subarray(at)]);
}

function raw(what: string, apply: (request: RawRequest) => RawRequest, mayBeAccepted = false): RawMutation {
  return { what, mayBeAccepted, apply };
}

/** Where in the target the path ends (a mutation there stays out of the query). */
function pathLength(target: Buffer): number {
  const query = target.indexOf('?');
  return query === -1 ? target.length : query;
}

const CONTROL_BYTES = [0x00, 0x01, 0x09, 0x0a, 0x0b, 0x0c, 0x0d, 0x20, 0x7f];

/** Bytes that are not UTF-8, or control bytes, anywhere in the request target. */
const targetBytes: fc.Arbitrary<RawMutation> = fc
  .tuple(
    fc.nat(),
    fc.oneof(
      fc.constantFrom(...INVALID_UTF8),
      fc.constantFrom(...CONTROL_BYTES).map((byte) => [byte]),
    ),
    fc.boolean(),
  )
  .map(([at, bytes, inPath]) =>
    raw(
      `bytes ${Buffer.from(bytes).toString('hex')} in the ${inPath ? 'path' : 'request target'}`,
      (request) => {
        // Strictly inside: white space after the target would only be a lenient separator.
        const end = inPath ? pathLength(request.target) : request.target.length;
        return { ...request, target: insertAt(request.target, 1 + (at % Math.max(1, end - 1)), bytes) };
      },
      // Outside the path they may only spoil the name of a query parameter nobody reads.
      !inPath,
    ),
  );

/** Malformed percent-encoding in the path (a parameter or a literal segment). */
const percentGarbageInPath: fc.Arbitrary<RawMutation> = fc
  .tuple(fc.nat(), fc.constantFrom(...PERCENT_GARBAGE))
  .map(([at, garbage]) =>
    raw(`${garbage} in the path`, (request) => ({
      ...request,
      target: insertAt(request.target, 1 + (at % pathLength(request.target)), Buffer.from(garbage)),
    })),
  );

/** Headers HTTP allows once: a second copy, with the same or another value, before or after. */
const SINGLETON_HEADERS = new Set([
  'host',
  'authorization',
  'content-type',
  'content-length',
  ...operations.flatMap((o) => o.parameters.filter((p) => p.in === 'header').map((p) => p.name.toLowerCase())),
]);

const duplicatedHeader: fc.Arbitrary<RawMutation> = fc
  .tuple(fc.nat(), fc.boolean(), fc.boolean(), hostileString(20))
  .map(([pick, same, first, other]) =>
    raw(
      `a duplicated header (${same ? 'same value' : 'another value'}, ${first ? 'before' : 'after'}) #${pick}`,
      (request) => {
        const candidates = request.headers.filter(([name]) => SINGLETON_HEADERS.has(name.toLowerCase()));
        const [name, value] = candidates[pick % candidates.length] ?? ['Host', Buffer.from('x')];
        const copy: [string, Buffer] = [name, same ? value : Buffer.from(other === '' ? 'x' : other, 'latin1')];
        const index = request.headers.findIndex(([existing]) => existing === name);
        const headers = [...request.headers];
        headers.splice(first ? index : index + 1, 0, copy);
        return { ...request, headers };
      },
    ),
  );

const missingHost: fc.Arbitrary<RawMutation> = fc.constant(
  raw('no Host header', (request) => ({
    ...request,
    headers: request.headers.filter(([name]) => name.toLowerCase() !== 'host'),
  })),
);

/** A byte that is not allowed, or not ASCII, early in the value of a header the API reads. */
const headerValueBytes: fc.Arbitrary<RawMutation> = fc
  .tuple(fc.nat(), fc.constantFrom(0x00, 0x01, 0x0b, 0x7f, 0x80, 0xc3, 0xff))
  .map(([pick, byte]) =>
    raw(`byte ${byte.toString(16)} in a header value #${pick}`, (request) => {
      const read = request.headers.filter(
        ([name]) => !['host', 'connection', 'content-length'].includes(name.toLowerCase()),
      );
      const [name] = read[pick % read.length] ?? ['Authorization'];
      return {
        ...request,
        headers: request.headers.map(([existing, value]) => [
          existing,
          existing === name ? insertAt(value, 1, [byte]) : value,
        ]),
      };
    }),
  );

const malformedHeaderLine: fc.Arbitrary<RawMutation> = fc.constantFrom(
  raw('white space before a colon', (request) => ({
    ...request,
    headers: [...request.headers, ['X-Fuzz ', Buffer.from('1')]],
  })),
  raw('a header line without a colon', (request) => ({
    ...request,
    headers: [...request.headers, ['X-Fuzz-1\r\nNo-Colon', Buffer.from('1')]],
  })),
  raw('a header name with a separator', (request) => ({
    ...request,
    headers: [...request.headers, ['X(Fuzz)', Buffer.from('1')]],
  })),
  raw('an obs-fold continuation line', (request) => ({
    ...request,
    headers: request.headers.map(([name, value]) => [
      name,
      name === 'Authorization' ? Buffer.concat([value.subarray(0, 3), Buffer.from('\r\n '), value.subarray(3)]) : value,
    ]),
  })),
  raw('bare LF line endings', (request) => ({ ...request, eol: '\n' })),
);

function withHeaders(request: RawRequest, replace: (name: string) => boolean, added: [string, string][]): RawRequest {
  return {
    ...request,
    headers: [
      ...request.headers.filter(([name]) => !replace(name.toLowerCase())),
      ...added.map(([name, value]): [string, Buffer] => [name, Buffer.from(value)]),
    ],
  };
}

/** Content-Length and Transfer-Encoding that disagree with the body or with HTTP. */
const badFraming: fc.Arbitrary<RawMutation> = fc.oneof(
  fc
    .nat()
    .map((cut) =>
      raw('a Content-Length shorter than the body', (request) =>
        withHeaders(request, (name) => name === 'content-length', [
          ['Content-Length', String(cut % Math.max(request.body.length, 1))],
        ]),
      ),
    ),
  fc
    .constantFrom('-1', '+1', '0x10', '1e1', '1, 1', '', 'abc', '99999999999999999999999')
    .map((value) =>
      raw(`Content-Length ${JSON.stringify(value)}`, (request) =>
        withHeaders(request, (name) => name === 'content-length', [['Content-Length', value]]),
      ),
    ),
  fc
    .constantFrom('gzip', 'chunked, chunked', 'identity', 'chunked;x', 'xchunked')
    .map((value) =>
      raw(`Transfer-Encoding ${value}`, (request) =>
        withHeaders(request, (name) => name === 'content-length', [['Transfer-Encoding', value]]),
      ),
    ),
  fc.constant(
    raw('Transfer-Encoding and Content-Length', (request) =>
      withHeaders(request, () => false, [['Transfer-Encoding', 'chunked']]),
    ),
  ),
  fc.constantFrom('zz', '-1', 'FFFFFFFFFFFFFFFFFF', '1;', '').map((size) =>
    raw(`a chunk size ${JSON.stringify(size)}`, (request) => ({
      ...withHeaders(request, (name) => name === 'content-length', [['Transfer-Encoding', 'chunked']]),
      body: Buffer.concat([Buffer.from(`${size}\r\n`), request.body, Buffer.from('\r\n0\r\n\r\n')]),
    })),
  ),
);

const requestLine: fc.Arbitrary<RawMutation> = fc.constantFrom(
  raw('a lower-case method', (request) => ({ ...request, method: request.method.toLowerCase() })),
  raw('a method with a control byte', (request) => ({ ...request, method: `${request.method}\u0000` })),
  raw('version HTTP/1.1x', (request) => ({ ...request, version: 'HTTP/1.1x' })),
  raw('version HTTP/9.9', (request) => ({ ...request, version: 'HTTP/9.9' })),
  raw('version HTTP/1.2', (request) => ({ ...request, version: 'HTTP/1.2' }), true),
  raw('two spaces after the method', (request) => ({ ...request, method: `${request.method} ` }), true),
);

/** One thing wrong in the bytes of a request; framing only where there is a body. */
export function rawMutation(hasBody: boolean): fc.Arbitrary<RawMutation> {
  return fc.oneof(
    targetBytes,
    percentGarbageInPath,
    duplicatedHeader,
    missingHost,
    headerValueBytes,
    malformedHeaderLine,
    requestLine,
    ...(hasBody ? [badFraming] : []),
  );
}
