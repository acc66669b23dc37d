/**
 * The media types of the API's JSON answers, as fastify's serializer writes them and the raw
 * writers copy them: fastify adds `charset=utf-8` to any JSON media type set without one, so every
 * writer names it, and one answer reads the same whichever wrote it (docs/errors.md).
 */

/** A success, and v1's `Error`. */
export const JSON_CONTENT_TYPE = 'application/json; charset=utf-8';

/** A problem detail (RFC 9457): every error of the newest version. */
export const PROBLEM_MEDIA_TYPE = 'application/problem+json';
export const PROBLEM_CONTENT_TYPE = `${PROBLEM_MEDIA_TYPE}; charset=utf-8`;

/** Whether a Content-Type header names a problem detail. */
export function isProblemContentType(contentType: unknown): boolean {
  return typeof contentType === 'string' && contentType.toLowerCase().startsWith(PROBLEM_MEDIA_TYPE);
}
