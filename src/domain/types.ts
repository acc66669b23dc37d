import type { components } from '../../generated/openapi.js';
import type { EventType } from './events.js';

// The store's entities, as the contract defines them; storage, handlers and rules all speak of these.

export type Pet = components['schemas']['Pet'];
export type PetStatus = components['schemas']['PetStatus'];
export type NewPetRecord = Required<components['schemas']['NewPet']>;
export type PetFields = Partial<NewPetRecord>;
export type Order = components['schemas']['Order'];
export type OrderStatus = components['schemas']['OrderStatus'];

/** A pet with its version, which every change increments: its ETag. */
export interface VersionedPet {
  pet: Pet;
  version: number;
}

/** A pet as a change of it is decided on, inside the transaction that writes the change. */
export interface PetState extends VersionedPet {
  /** The id of the order placed for it, while one is. */
  placedOrderId: number | undefined;
}

/** An order's move, and its pet's with it. */
export interface OrderChange {
  status: OrderStatus;
  petStatus: PetStatus;
}

/** The event each order status is announced with. */
export const ORDER_EVENTS = {
  placed: 'order.placed',
  completed: 'order.completed',
  cancelled: 'order.cancelled',
} as const satisfies Record<OrderStatus, EventType>;
