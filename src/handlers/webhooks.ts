import { randomBytes } from 'node:crypto';
import { AddressGuard, RefusedAddress } from '../events/address-guard.js';
import type { EventType } from '../domain/events.js';
import { eventIdOf } from '../domain/events.js';
import { ApiError } from '../domain/errors.js';
import { principalOf } from './idempotency.js';
import { wholeList } from './paging.js';
import type { HandlerModule } from './types.js';

function notFound(id: number): ApiError {
  return new ApiError(404, 'not_found', `No webhook endpoint with id ${id}`);
}

/** A signing secret as Standard Webhooks spells it: `whsec_` and the base64 of 24 random bytes. */
function newSecret(): string {
  return `whsec_${randomBytes(24).toString('base64')}`;
}

function found<T>(value: T | undefined, id: number): T {
  if (value === undefined) throw notFound(id);
  return value;
}

export const webhookHandlers: HandlerModule = ({
  storage: { webhooks },
  webhookSettings: settings,
  contract: { eventScopes },
  basePath,
}) => {
  const guard = new AddressGuard(settings.allowedNetworks);
  /** A key subscribes only to kinds whose data it may read: the scope each kind's `x-scope` names. */
  const requireEventScopes = (held: readonly string[] | null, events: readonly EventType[]) => {
    if (held === null) return;
    for (const kind of events) {
      const scope = eventScopes.get(kind) ?? kind;
      if (!held.includes(scope)) {
        throw new ApiError(
          403,
          'insufficient_scope',
          `This API key lacks the scope ${scope}, which ${kind} events need`,
        );
      }
    }
  };
  const checkUrl = async (url: string | undefined) => {
    if (url === undefined) return;
    try {
      await guard.check(url);
    } catch (error) {
      if (error instanceof RefusedAddress) throw new ApiError(400, 'webhook_url_refused', `url: ${error.message}`);
      throw error;
    }
  };

  return {
    async listWebhooks(request) {
      return wholeList(await webhooks.list(principalOf(request).accountId));
    },

    async createWebhook(request, reply) {
      // v2's contract makes an endpoint made through it v2; v1's request names v1 (eventsByVersion).
      const { url, events, apiVersion = 'v2' } = request.body;
      const { accountId, scopes } = principalOf(request);
      requireEventScopes(scopes, events);
      await checkUrl(url);
      const secret = newSecret();
      const endpoint = await webhooks.create(accountId, { url, events, apiVersion }, secret, settings.maxEndpoints);
      if (endpoint === 'limit_reached') {
        throw new ApiError(
          409,
          'webhook_limit_reached',
          `This account has the most webhook endpoints it may have (${settings.maxEndpoints}): remove one first`,
        );
      }
      reply.code(201).header('location', `${basePath}/webhooks/${endpoint.id}`);
      return { ...endpoint, secret };
    },

    async getWebhook(request) {
      const { webhookId } = request.params;
      return found(await webhooks.get(principalOf(request).accountId, webhookId), webhookId);
    },

    async updateWebhook(request) {
      const { webhookId } = request.params;
      const { accountId, scopes } = principalOf(request);
      // The kinds it will be subscribed to: a new url or enabling it sends their data too.
      if (scopes !== null) {
        const events = request.body.events ?? found(await webhooks.get(accountId, webhookId), webhookId).events;
        requireEventScopes(scopes, events);
      }
      await checkUrl(request.body.url);
      return found(await webhooks.update(accountId, webhookId, request.body), webhookId);
    },

    async deleteWebhook(request, reply) {
      const { webhookId } = request.params;
      if (!(await webhooks.remove(principalOf(request).accountId, webhookId))) throw notFound(webhookId);
      reply.code(204);
      return undefined;
    },

    async testWebhook(request, reply) {
      const { webhookId } = request.params;
      const queued = found(await webhooks.sendTest(principalOf(request).accountId, webhookId), webhookId);
      if (queued === 'disabled') {
        throw new ApiError(409, 'webhook_disabled', `Webhook endpoint ${webhookId} is disabled`);
      }
      reply.code(202);
      return { eventId: eventIdOf(queued.eventId) };
    },

    async rotateWebhookSecret(request) {
      const { webhookId } = request.params;
      const secret = newSecret();
      const rotation = { secret, previousExpiresAt: Date.now() + settings.secretGraceMs };
      const endpoint = await webhooks.rotateSecret(principalOf(request).accountId, webhookId, rotation);
      return { ...found(endpoint, webhookId), secret };
    },

    async listWebhookDeliveries(request) {
      const { webhookId } = request.params;
      const { limit = 20 } = request.query;
      // The most recent attempts only: older ones are not paged to.
      return wholeList(found(await webhooks.attempts(principalOf(request).accountId, webhookId, limit), webhookId));
    },
  };
};
