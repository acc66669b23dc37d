/**
 * Bench-only toggles for the features that have no setting, for costs.ts: loaded into the project's
 * server with `node --import`, it rewrites named lines of the built code as Node loads them, for
 * the features BENCH_FEATURE_OFF names (comma-separated). The product's code is not changed, and a
 * rewrite whose line is no longer there stops the start rather than measure nothing.
 */
import { register } from 'node:module';
import { isMainThread } from 'node:worker_threads';

/** A feature: in which built file, which text, replaced by what. */
export const REWRITES: Record<string, { file: string; from: string; to: string }[]> = {
  'request id': [
    { file: 'dist/src/app/server-options.js', from: `REQUEST_ID.test(sent) ? sent : randomUUID()`, to: `'-'` },
    {
      file: 'dist/src/app/operation-hooks.js',
      from: `reply.header('x-request-id', request.id).header(`,
      to: `reply.header(`,
    },
  ],
  'deprecation headers': [
    { file: 'dist/src/app/operation-hooks.js', from: `onRequest.push(markDeprecated(deprecation));`, to: `;` },
  ],
  'auth and scope check': [
    {
      file: 'dist/src/app/operation-hooks.js',
      from: `onRequest.push(migrate === undefined ? authenticate : authenticator(refuseHere));`,
      to: `;`,
    },
    {
      file: 'dist/src/app/operation-hooks.js',
      from: `onRequest.push(requireScopes(operation.scopes, refuseHere));`,
      to: `;`,
    },
  ],
  ETag: [{ file: 'dist/src/handlers/pets.js', from: `reply.header('etag', entityTag(versioned));`, to: `` }],
  // fastify then writes the body with JSON.stringify rather than the contract's compiled serializer.
  'compiled serialization': [
    { file: 'dist/src/app/version-routes.js', from: `responses[status] = json;`, to: `delete responses[status];` },
  ],
};

interface LoadResult {
  format?: string;
  source?: string | ArrayBuffer | Uint8Array;
}
type NextLoad = (url: string, context: object) => Promise<LoadResult>;

/** The hook, in the loader's thread: applies the rewrites it was given (`data`) to their files. */
export async function load(url: string, context: object, nextLoad: NextLoad): Promise<LoadResult> {
  const loaded = await nextLoad(url, context);
  const rewrites = (globalThis as { rewrites?: (typeof REWRITES)[string] }).rewrites ?? [];
  const mine = rewrites.filter(({ file }) => url.endsWith(`/${file}`));
  if (mine.length === 0 || loaded.source === undefined) return loaded;
  let source = Buffer.from(loaded.source as Uint8Array).toString('utf8');
  for (const { from, to } of mine) {
    if (!source.includes(from)) throw new Error(`feature-off: "${from}" is no longer in ${url}`);
    source = source.replaceAll(from, to);
  }
  return { ...loaded, source };
}

export function initialize(data: (typeof REWRITES)[string]): void {
  (globalThis as { rewrites?: typeof data }).rewrites = data;
}

const off = (process.env.BENCH_FEATURE_OFF ?? '').split(',').filter(Boolean);
// Node loads this module again in its loader thread, for the hooks above.
if (isMainThread && off.length > 0) {
  const unknown = off.filter((name) => REWRITES[name] === undefined);
  if (unknown.length > 0) throw new Error(`BENCH_FEATURE_OFF: unknown ${unknown.join(', ')}`);
  register(import.meta.url, { data: off.flatMap((name) => REWRITES[name] ?? []) });
}
