/**
 * Development only (`npm run dev`): an operation of the contract that has no handler yet is
 * answered from the contract, so it can be tried the moment it is written. The answer is the
 * documented example of the operation's first success response (or a value generated from its
 * schema by openapi-sampler), marked by `X-Petstore-Mock`. As with Prism, `Prefer: code=404` picks
 * another documented response and `Prefer: example=<name>` another documented example.
 * Authentication and request validation run first, as for any operation.
 */
import type { FastifyReply, FastifyRequest } from 'fastify';
import type { OpenAPIV3_1 } from 'openapi-types';
import type { Contract, ContractOperation } from '../contract/document.js';
import { ApiError } from '../domain/errors.js';

/** `example` (a documented example) or `schema` (generated from the schema): never in production. */
export const MOCK_HEADER = 'x-petstore-mock';

type ResponseObject = OpenAPIV3_1.ResponseObject;
type MediaTypeObject = OpenAPIV3_1.MediaTypeObject;
type Sampler = (schema: object) => unknown;

export interface Preference {
  code?: string;
  example?: string;
}

/** RFC 7240 `Prefer: code=404, example=notFound` (also `;`-separated, as Prism accepts). */
export function parsePrefer(header: string | string[] | undefined): Preference {
  const preference: Preference = {};
  for (const part of [header ?? []].flat().join(',').split(/[,;]/)) {
    const [name, ...value] = part.split('=');
    const text = value
      .join('=')
      .trim()
      .replace(/^"(.*)"$/, '$1');
    if (name?.trim() === 'code') preference.code = text;
    if (name?.trim() === 'example') preference.example = text;
  }
  return preference;
}

interface Sample {
  value: unknown;
  from: 'example' | 'schema';
}

/** The named example, or the first documented one, or one generated from the schema. */
function sampleOf(media: MediaTypeObject, exampleName: string | undefined, sample: Sampler, what: string): Sample {
  const examples = (media.examples ?? {}) as Record<string, OpenAPIV3_1.ExampleObject>;
  if (exampleName !== undefined) {
    const chosen = examples[exampleName];
    if (chosen === undefined) {
      const names = Object.keys(examples);
      throw new ApiError(
        400,
        'invalid_request',
        `Prefer: example=${exampleName}: ${what} documents ${names.length === 0 ? 'no named examples' : `only ${names.join(', ')}`}`,
      );
    }
    return { value: chosen.value, from: 'example' };
  }
  const [first] = Object.values(examples);
  if (first !== undefined) return { value: first.value, from: 'example' };
  if (media.example !== undefined) return { value: media.example, from: 'example' };
  const schema = (media.schema ?? {}) as { examples?: unknown[]; example?: unknown };
  if (Array.isArray(schema.examples) && schema.examples.length > 0)
    return { value: schema.examples[0], from: 'example' };
  if (schema.example !== undefined) return { value: schema.example, from: 'example' };
  return { value: sample(schema), from: 'schema' };
}

/** The preferred documented status, or the first success one. */
function chooseStatus(operation: OpenAPIV3_1.OperationObject, code: string | undefined): [string, ResponseObject] {
  const responses = (operation.responses ?? {}) as Record<string, ResponseObject>;
  const statuses = Object.keys(responses).sort();
  const status = code ?? statuses.find((candidate) => candidate.startsWith('2')) ?? statuses[0];
  const response = status === undefined ? undefined : responses[status];
  if (status === undefined || response === undefined) {
    throw new ApiError(
      400,
      'invalid_request',
      `Prefer: code=${code ?? ''}: ${operation.operationId ?? 'the operation'} documents only ${statuses.join(', ')}`,
    );
  }
  return [status, response];
}

export type MockHandler = (request: FastifyRequest, reply: FastifyReply) => Promise<unknown>;

/** Builds, per operation, a handler that answers from the contract. */
export async function contractMocks(contract: Contract): Promise<(operation: ContractOperation) => MockHandler> {
  // Loaded only in development: production never answers from the contract.
  const { sample: sampleSchema } = await import('openapi-sampler');
  const sample: Sampler = (schema) => sampleSchema(schema, { quiet: true });
  return ({ method, path, operationId }) => {
    const item = contract.dereferenced.paths?.[path] as Record<string, OpenAPIV3_1.OperationObject> | undefined;
    const operation = item?.[method.toLowerCase()];
    if (operation === undefined) throw new Error(`${method} ${path} is not in the contract`);
    return async (request, reply) => {
      const preference = parsePrefer(request.headers.prefer);
      const [status, response] = chooseStatus(operation, preference.code);
      const what = `${operationId} ${status}`;
      reply.code(Number(status));
      // Required documented headers, from their examples (or schemas), so the answer conforms.
      for (const [name, header] of Object.entries(response.headers ?? {}) as [string, OpenAPIV3_1.HeaderObject][]) {
        if (header.required !== true || reply.hasHeader(name)) continue;
        reply.header(name, String(sampleOf({ ...header, examples: {} }, undefined, sample, what).value));
      }
      // JSON, or a problem detail (an error's).
      const [mediaType, media] = Object.entries(response.content ?? {})[0] ?? [];
      if (mediaType === undefined || media === undefined) {
        reply.header(MOCK_HEADER, 'example');
        return reply.send();
      }
      const { value, from } = sampleOf(media, preference.example, sample, what);
      reply.header(MOCK_HEADER, from).type(mediaType);
      return value;
    };
  };
}
