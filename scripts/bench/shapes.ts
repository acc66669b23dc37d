/**
 * The shapes the newest version's contract gives its answers, read from the built contract, so that
 * the bare reference answers as /v2 does and the bench's checks count a page's items whichever way
 * the contract writes a page: a bare array or a `{data, nextCursor}` envelope; an `Error` or a
 * problem detail (RFC 9457).
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { projectRoot } from './settings.js';

export interface AnswerShapes {
  /** listPets answers `{data, nextCursor}` rather than a bare array. */
  envelope: boolean;
  /** Errors are `application/problem+json` `{type, title, status, detail, code}` rather than `{code, message, status}`. */
  problem: boolean;
}

interface Operation {
  responses?: Record<string, { content?: Record<string, { schema?: { type?: unknown } }> }>;
}

/** What listPets' 200 and 400 say in a dereferenced OpenAPI document. */
export function shapesOf(dereferenced: { paths?: Record<string, { get?: Operation }> }): AnswerShapes {
  const responses = dereferenced.paths?.['/pets']?.get?.responses ?? {};
  const page = responses['200']?.content?.['application/json']?.schema;
  if (page === undefined) throw new Error('the contract has no listPets 200 answer in application/json');
  return { envelope: page.type !== 'array', problem: 'application/problem+json' in (responses['400']?.content ?? {}) };
}

/** The newest version's shapes, from the contract `npm run build` compiled (the bench imports nothing of src/). */
export function contractShapes(): AnswerShapes {
  const file = join(projectRoot, 'dist/contract/openapi.json');
  const compiled = JSON.parse(readFileSync(file, 'utf8')) as { dereferenced: object };
  return shapesOf(compiled.dereferenced);
}

/** The items of a page as either shape carries them (undefined: not a page). */
export function pageItems(body: unknown): unknown[] | undefined {
  if (Array.isArray(body)) return body as unknown[];
  const data = (body as { data?: unknown } | null)?.data;
  return Array.isArray(data) ? (data as unknown[]) : undefined;
}
