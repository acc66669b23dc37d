import type { Contract } from '../contract/document.js';
import { StoreRules } from '../domain/rules.js';
import { DEFAULT_WEBHOOKS, type WebhookSettings } from '../events/settings.js';
import type { Storage } from '../storage/types.js';
import { orderHandlers } from './orders.js';
import { petHandlers } from './pets.js';
import type { ServiceHandlers } from './types.js';
import { webhookHandlers } from './webhooks.js';

/** The service object the glue resolves operationIds against: one entry per operation. */
export function serviceHandlers(
  storage: Storage,
  contract: Contract,
  webhooks: WebhookSettings = DEFAULT_WEBHOOKS,
): ServiceHandlers {
  const rules = new StoreRules(contract.dereferenced);
  return {
    ...petHandlers(storage.pets, rules, contract.basePath),
    ...orderHandlers(storage.orders, rules, contract.basePath),
    ...webhookHandlers(storage.webhooks, webhooks, contract),
  };
}
