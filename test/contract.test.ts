import { Ajv2020 } from 'ajv/dist/2020.js';
import addFormats from 'ajv-formats';
import type { OpenAPIV3_1 } from 'openapi-types';
import t from 'tap';
import { contract } from './helpers/contract.js';

const document = contract.dereferenced;
const ajv = addFormats.default(new Ajv2020({ strict: false }));

t.test('the contract validates and declares what the decisions require', async (t) => {
  t.equal(document.openapi, '3.1.0');
  t.equal(document.info.version, '1.0.0');
  t.equal(contract.basePath, '/v1');
  const servers = document.servers ?? [];
  t.same(
    servers.map((server) => server.description),
    ['Production', 'Staging', 'Local development (`npm start`)'],
  );
  for (const server of servers) t.match(server.url, /\/v1$/);
  t.same(contract.operations.map(({ operationId, method, path }) => `${operationId} ${method} ${path}`).sort(), [
    'createPet POST /pets',
    'getPet GET /pets/{petId}',
    'listPets GET /pets',
  ]);
  for (const operation of contract.operations) {
    t.same(operation.securitySchemes, ['apiKey'], `${operation.operationId} needs the bearer key`);
    t.equal(operation.deprecated, operation.operationId === 'getPet');
  }
  const scheme = document.components?.securitySchemes?.apiKey as OpenAPIV3_1.HttpSecurityScheme;
  t.same([scheme.type, scheme.scheme], ['http', 'bearer']);
});

t.test('every operation has a summary and every response an example that fits its schema', async (t) => {
  for (const [path, item] of Object.entries(document.paths ?? {})) {
    for (const method of ['get', 'post'] as const) {
      const operation = item?.[method];
      if (operation === undefined) continue;
      const name = `${method.toUpperCase()} ${path}`;
      t.ok(operation.summary, `${name} has a summary`);
      for (const [status, response] of Object.entries(operation.responses) as [string, OpenAPIV3_1.ResponseObject][]) {
        const media = response.content?.['application/json'];
        const examples = Object.values(media?.examples ?? {}) as OpenAPIV3_1.ExampleObject[];
        t.ok(examples.length > 0, `${name} ${status} has an example`);
        const validate = ajv.compile(media?.schema as object);
        for (const example of examples) {
          t.ok(validate(example.value), `${name} ${status} example fits: ${ajv.errorsText(validate.errors)}`);
          if (Number(status) >= 400) t.equal((example.value as { status: number }).status, Number(status));
        }
      }
    }
  }
});

t.test('the Error code enum covers every code the decisions name', async (t) => {
  const error = document.components?.schemas?.Error as OpenAPIV3_1.SchemaObject;
  const codes = (error.properties?.code as OpenAPIV3_1.SchemaObject).enum ?? [];
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
