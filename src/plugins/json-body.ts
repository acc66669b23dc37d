import { isUtf8 } from 'node:buffer';
import type { FastifyError, FastifyInstance } from 'fastify';
import fp from 'fastify-plugin';
import { ApiError } from '../errors.js';

/**
 * The first key an object in `json` (already known to be valid JSON) holds twice. JSON.parse keeps
 * the last value silently, so `{"name":5,"name":"Rex"}` would pass as `{"name":"Rex"}`.
 */
export function duplicateKey(json: string): string | undefined {
  // One entry per open object (its keys so far) or array (null).
  const open: (Set<string> | null)[] = [];
  let expectingKey = false;
  for (let i = 0; i < json.length; i += 1) {
    const char = json[i];
    if (char === '"') {
      const start = i;
      for (i += 1; json[i] !== '"'; i += 1) if (json[i] === '\\') i += 1;
      const keys = open.at(-1);
      if (expectingKey && keys) {
        const key = JSON.parse(json.slice(start, i + 1)) as string;
        if (keys.has(key)) return key;
        keys.add(key);
        expectingKey = false;
      }
    } else if (char === '{') {
      open.push(new Set());
      expectingKey = true;
    } else if (char === '[') {
      open.push(null);
    } else if (char === '}' || char === ']') {
      open.pop();
    } else if (char === ',') {
      expectingKey = open.at(-1) instanceof Set;
    }
  }
  return undefined;
}

function isRefusedJson(error: Error): boolean {
  return (error as FastifyError).code === 'FST_ERR_CTP_INVALID_JSON_BODY';
}

/** fastify's parser says only that it refused a body: it is not JSON, or it is JSON that could pollute prototypes. */
function whyRefused(text: string): ApiError {
  try {
    JSON.parse(text);
  } catch (error) {
    return new ApiError(400, 'malformed_json', `Body is not valid JSON: ${(error as Error).message}`);
  }
  return new ApiError(400, 'malformed_json', 'Body may not hold a "__proto__" key, nor "constructor" with "prototype"');
}

/**
 * Bodies are JSON and nothing else. fastify's parser is kept (it rejects `__proto__` and
 * `constructor.prototype`), after two checks it lacks: bytes that are not UTF-8 would become
 * U+FFFD, and a repeated key would silently drop a value. Both are 400 `malformed_json`.
 */
async function jsonBodyPlugin(app: FastifyInstance): Promise<void> {
  const parse = app.getDefaultJsonParser('error', 'error');
  app.removeAllContentTypeParsers();
  app.addContentTypeParser('application/json', { parseAs: 'buffer' }, (request, body: Buffer, done) => {
    if (!isUtf8(body)) {
      done(new ApiError(400, 'malformed_json', 'Body is not valid UTF-8'), undefined);
      return;
    }
    const text = body.toString('utf8');
    // The default parser answers through the callback; it returns nothing to await.
    void parse(request, text, (error: Error | null, value?: unknown) => {
      if (error !== null) {
        done(isRefusedJson(error) ? whyRefused(text) : error, undefined);
        return;
      }
      const repeated = duplicateKey(text);
      if (repeated === undefined) done(null, value);
      else done(new ApiError(400, 'malformed_json', `Body has the key "${repeated}" more than once`), undefined);
    });
  });
}

export default fp(jsonBodyPlugin, { name: 'json-body' });
