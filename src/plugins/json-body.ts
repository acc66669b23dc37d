import { isUtf8 } from 'node:buffer';
import type { FastifyError, FastifyInstance, preParsingHookHandler } from 'fastify';
import fp from 'fastify-plugin';
import { ApiError } from '../domain/errors.js';

const QUOTE = 0x22;
const BACKSLASH = 0x5c;
const OPEN_OBJECT = 0x7b;
const CLOSE_OBJECT = 0x7d;
const OPEN_ARRAY = 0x5b;
const CLOSE_ARRAY = 0x5d;
const COMMA = 0x2c;

/**
 * The first key an object in `json` (already known to be valid JSON) holds twice. JSON.parse keeps
 * the last value silently, so `{"name":5,"name":"Rex"}` would pass as `{"name":"Rex"}`. Read by
 * character code, and a key without escapes taken as it stands: every body with a JSON object
 * is scanned.
 */
export function duplicateKey(json: string): string | undefined {
  // One entry per open object (its keys so far) or array (null).
  const open: (Set<string> | null)[] = [];
  let expectingKey = false;
  for (let i = 0; i < json.length; i += 1) {
    const code = json.charCodeAt(i);
    if (code === QUOTE) {
      const start = i;
      let escaped = false;
      for (i += 1; json.charCodeAt(i) !== QUOTE; i += 1) {
        if (json.charCodeAt(i) === BACKSLASH) {
          i += 1;
          escaped = true;
        }
      }
      const keys = open[open.length - 1];
      if (expectingKey && keys) {
        const key = escaped ? (JSON.parse(json.slice(start, i + 1)) as string) : json.slice(start + 1, i);
        if (keys.has(key)) return key;
        keys.add(key);
        expectingKey = false;
      }
    } else if (code === OPEN_OBJECT) {
      open.push(new Set());
      expectingKey = true;
    } else if (code === OPEN_ARRAY) {
      open.push(null);
    } else if (code === CLOSE_OBJECT || code === CLOSE_ARRAY) {
      open.pop();
    } else if (code === COMMA) {
      expectingKey = open[open.length - 1] instanceof Set;
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

/** RFC 9110 12.5.3: a 415 for a content coding names the codings taken, here none but identity. */
const COMPRESSED = new ApiError(
  415,
  'unsupported_media_type',
  'Content-Encoding is not supported: send the body uncompressed',
  { 'accept-encoding': 'identity' },
);
const NOT_UTF8 = new ApiError(
  415,
  'unsupported_media_type',
  'The body must be UTF-8: a charset parameter, if sent, must be utf-8',
);

/** Whether the body comes in a content coding other than `identity` (RFC 9110 8.4). */
function isCoded(contentEncoding: string | undefined): boolean {
  if (contentEncoding === undefined) return false;
  return contentEncoding.split(',').some((coding) => {
    const name = coding.trim();
    return name !== '' && name.toLowerCase() !== 'identity';
  });
}

/** Whether a Content-Type names a charset other than UTF-8 (RFC 9110 8.3.1: any case, perhaps quoted). */
function namesOtherCharset(contentType: string | undefined): boolean {
  if (contentType?.includes(';') !== true) return false;
  return contentType
    .split(';')
    .slice(1)
    .some((parameter) => {
      const equals = parameter.indexOf('=');
      if (equals < 0 || parameter.slice(0, equals).trim().toLowerCase() !== 'charset') return false;
      const value = parameter.slice(equals + 1).trim();
      const charset = /^".*"$/.test(value) ? value.slice(1, -1).replace(/\\(.)/g, '$1') : value;
      return charset.toLowerCase() !== 'utf-8';
    });
}

/** The JSON media types bodies come in: plain, and a JSON merge patch (RFC 7396) for a change. */
export const JSON_MEDIA_TYPES = ['application/json', 'application/merge-patch+json'] as const;

function essenceOf(contentType: string): string {
  return (contentType.split(';', 1)[0] ?? '').trim().toLowerCase();
}

function hasBody(headers: {
  'content-length'?: string | undefined;
  'transfer-encoding'?: string | undefined;
}): boolean {
  return headers['transfer-encoding'] !== undefined || Number(headers['content-length'] ?? 0) > 0;
}

/**
 * Before a body is read (a preParsing hook, so after authentication): a 415 for one that is not of
 * the operation's media type, or cannot be read as JSON text, compressed or in another charset.
 * Without it, a gzip body is a 400 for bytes that are not UTF-8, and a UTF-16 or Latin-1 one is
 * read as UTF-8.
 */
export function refuseUnreadableBody(mediaType: string): preParsingHookHandler {
  const otherType = new ApiError(415, 'unsupported_media_type', `Content-Type must be ${mediaType}`);
  return (request, _reply, payload, done) => {
    const { headers } = request;
    const contentType = headers['content-type'];
    if (contentType === undefined ? hasBody(headers) : essenceOf(contentType) !== mediaType) done(otherType);
    else if (isCoded(headers['content-encoding'])) done(COMPRESSED);
    else if (namesOtherCharset(contentType)) done(NOT_UTF8);
    else done(null, payload);
  };
}

const NO_BODY_TAKEN = new ApiError(415, 'unsupported_media_type', 'This operation takes no body: send none');

/**
 * For an operation whose contract declares no request body: a 415 for a request that sends one,
 * whatever its type, before it is read. RFC 9110 gives such content no meaning (9.3.1, 9.3.5);
 * ignoring it would let a client believe that what it sent was taken. A Content-Type without a
 * body (some clients send one on every request) describes nothing, and is dropped: fastify would
 * otherwise parse the empty body by it, a 400 for JSON and a 415 for any other type.
 */
export const refuseAnyBody: preParsingHookHandler = (request, _reply, payload, done) => {
  if (hasBody(request.headers)) {
    done(NO_BODY_TAKEN);
    return;
  }
  delete request.raw.headers['content-type'];
  done(null, payload);
};

/**
 * Bodies are JSON and nothing else (each operation's one media type: refuseUnreadableBody). fastify's parser is kept (it rejects `__proto__` and
 * `constructor.prototype`), after two checks it lacks: bytes that are not UTF-8 would become
 * U+FFFD, and a repeated key would silently drop a value. Both are 400 `malformed_json`.
 */
async function jsonBodyPlugin(app: FastifyInstance): Promise<void> {
  const parse = app.getDefaultJsonParser('error', 'error');
  app.removeAllContentTypeParsers();
  app.addContentTypeParser([...JSON_MEDIA_TYPES], { parseAs: 'buffer' }, (request, body: Buffer, done) => {
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
