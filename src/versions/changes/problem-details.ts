import { isProblemContentType, JSON_CONTENT_TYPE } from '../../contract/media-types.js';
import type { VersionChange } from '../change.js';

/** A problem detail, as v2 answers every error. */
interface Problem {
  type: string;
  title: string;
  status: number;
  detail: string;
  code: string;
}

/** v1's error body, in the order v1 writes its members. */
interface ErrorBody {
  code: string;
  message: string;
  status: number;
}

function isProblem(body: unknown): body is Problem {
  return typeof body === 'object' && body !== null && 'detail' in body && 'code' in body && 'status' in body;
}

/**
 * v2 answers every error as a problem detail (RFC 9457), `application/problem+json`
 * `{type, title, status, detail, code}`, the standard shape generic clients and gateways read. v1
 * keeps its `Error`, `{code, message, status}` in `application/json`: the problem's `detail` is
 * its `message`, the same words.
 */
export const problemDetails: VersionChange = {
  description:
    'Every error is a problem detail (RFC 9457): `application/problem+json` with `{type, title, status, detail, code}`, where v1 answered `application/json` with `{code, message, status}`; `detail` is what `message` said, and `type` is `https://petstore.example/problems/<code>`.',
  // Each error response, once (a shared response is named where the check first meets it): its
  // media type; and the first, GET /pets's 400, where it also meets the schema (Error → Problem).
  covers: [
    { at: 'GET /pets responses/400' },
    // A receiver's 410 to an event, documented as v2's failures are; its body is not read.
    { at: '#/webhooks/pet.created/post/responses/410', rule: 'media-type-removed' },
    { at: 'DELETE /pets/{petId} responses/404', rule: 'media-type-removed' },
    { at: 'DELETE /pets/{petId} responses/409', rule: 'media-type-removed' },
    { at: 'DELETE /pets/{petId} responses/412', rule: 'media-type-removed' },
    { at: 'GET /pets responses/401', rule: 'media-type-removed' },
    { at: 'GET /pets responses/403', rule: 'media-type-removed' },
    { at: 'GET /pets responses/405', rule: 'media-type-removed' },
    { at: 'GET /pets responses/415', rule: 'media-type-removed' },
    { at: 'GET /pets responses/429', rule: 'media-type-removed' },
    { at: 'GET /pets responses/500', rule: 'media-type-removed' },
    { at: 'GET /pets responses/501', rule: 'media-type-removed' },
    { at: 'GET /pets responses/503', rule: 'media-type-removed' },
    { at: 'GET /webhooks/{webhookId} responses/404', rule: 'media-type-removed' },
    { at: 'POST /pets responses/404', rule: 'media-type-removed' },
    { at: 'POST /pets responses/408', rule: 'media-type-removed' },
    { at: 'POST /pets responses/413', rule: 'media-type-removed' },
    { at: 'POST /pets responses/422', rule: 'media-type-removed' },
    { at: 'POST /webhooks responses/400', rule: 'media-type-removed' },
    { at: 'POST /webhooks responses/403', rule: 'media-type-removed' },
    { at: 'POST /webhooks responses/409', rule: 'media-type-removed' },
    { at: 'POST /webhooks/{webhookId}/test responses/409', rule: 'media-type-removed' },
  ],
  responseDown: (response) => {
    if (!isProblemContentType(response.headers['content-type']) || !isProblem(response.body)) return;
    const { code, detail, status } = response.body;
    const error: ErrorBody = { code, message: detail, status };
    response.body = error;
    response.headers['content-type'] = JSON_CONTENT_TYPE;
  },
};
