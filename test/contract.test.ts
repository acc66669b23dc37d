import { Ajv2020 } from 'ajv/dist/2020.js';
import addFormats from 'ajv-formats';
import type { OpenAPIV3_1 } from 'openapi-types';
import t from 'tap';
import { operationObject } from '../scripts/contract-check/tools.js';
import { contract } from './helpers/contract.js';

const document = contract.dereferenced;
const ajv = addFormats.default(new Ajv2020({ strict: false }));

t.test('the contract validates and declares what the decisions require', async (t) => {
  t.equal(document.openapi, '3.1.0');
  t.match(document.info.version, /^1\.\d+\.\d+$/, 'a version of the major the base path names');
  t.equal(contract.basePath, '/v1');
  const servers = document.servers ?? [];
  t.same(
    servers.map((server) => server.description),
    ['Production', 'Staging', 'Local development (`npm start`)'],
  );
  for (const server of servers) t.match(server.url, /\/v1$/);
  const ids = contract.operations.map(({ operationId }) => operationId);
  t.same([...new Set(ids)], ids, 'every operationId is unique');
  for (const operation of contract.operations) {
    t.same(operation.securitySchemes, ['apiKey'], `${operation.operationId} needs the bearer key`);
  }
  const scheme = document.components?.securitySchemes?.apiKey as OpenAPIV3_1.HttpSecurityScheme;
  t.same([scheme.type, scheme.scheme], ['http', 'bearer']);
});

/** Each operation of the contract, with its responses by status. */
const operationObjects = contract.operations.map((operation) => {
  const object = operationObject(contract, operation) ?? {};
  return {
    name: `${operation.method} ${operation.path}`,
    deprecated: operation.deprecated,
    summary: object.summary,
    responses: Object.entries(object.responses ?? {}) as [string, OpenAPIV3_1.ResponseObject][],
  };
});

t.test('every operation has a summary and every response body an example that fits its schema', async (t) => {
  for (const { name, summary, responses } of operationObjects) {
    t.ok(summary, `${name} has a summary`);
    for (const [status, response] of responses) {
      // A response without content (a 204) has no body to exemplify.
      if (response.content === undefined) continue;
      const media = response.content['application/json'];
      const examples = Object.values(media?.examples ?? {}) as OpenAPIV3_1.ExampleObject[];
      t.ok(examples.length > 0, `${name} ${status} has an example`);
      const validate = ajv.compile(media?.schema ?? {});
      for (const example of examples) {
        t.ok(validate(example.value), `${name} ${status} example fits: ${ajv.errorsText(validate.errors)}`);
        if (Number(status) >= 400) t.equal((example.value as { status: number }).status, Number(status));
      }
    }
  }
});

t.test('every response of a deprecated operation documents Deprecation, Sunset and Link', async (t) => {
  for (const { name, deprecated, responses } of operationObjects) {
    if (!deprecated) continue;
    for (const [status, response] of responses) {
      // A 405 is the path's answer to a method it does not take, not the operation's.
      if (status === '405') continue;
      const headers = Object.keys(response.headers ?? {});
      for (const header of ['Deprecation', 'Sunset', 'Link'])
        t.ok(headers.includes(header), `${name} ${status} ${header}`);
    }
  }
});

t.test('Error.code is an open string; ErrorCode lists every code the decisions name', async (t) => {
  const error = document.components?.schemas?.Error as OpenAPIV3_1.SchemaObject;
  const code = error.properties?.code as OpenAPIV3_1.SchemaObject;
  t.equal(code.enum, undefined, 'codes can grow in minor versions');
  const codes = (document.components?.schemas?.ErrorCode as OpenAPIV3_1.SchemaObject).enum ?? [];
  const pattern = new RegExp(code.pattern ?? '');
  t.ok(
    codes.every((known) => pattern.test(String(known))),
    'every listed code fits Error.code',
  );
  for (const code of [
    'invalid_request',
    'malformed_json',
    'unauthorized',
    'not_found',
    'method_not_allowed',
    'payload_too_large',
    'unsupported_media_type',
    'rate_limited',
    'internal_error',
  ]) {
    t.ok(codes.includes(code), code);
  }
});
