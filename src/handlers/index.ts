import type { Storage } from '../storage/types.js';
import { petHandlers } from './pets.js';
import type { ServiceHandlers } from './types.js';

/** The service object the glue resolves operationIds against: one entry per operation. */
export function serviceHandlers(storage: Storage, basePath: string): ServiceHandlers {
  return { ...petHandlers(storage.pets, basePath) };
}
