import { ApiError } from '../domain/errors.js';
import { claimOf, created } from './idempotency.js';
import { DEFAULT_LIMIT, FilteredList } from './paging.js';
import type { HandlerModule } from './types.js';

function notFound(id: number): ApiError {
  return new ApiError(404, 'not_found', `No order with id ${id}`);
}

export const orderHandlers: HandlerModule = ({ storage: { orders }, rules, basePath }) => {
  return {
    async listOrders(request) {
      const { limit = DEFAULT_LIMIT, status, cursor } = request.query;
      const list = new FilteredList('/store/orders', { status });
      const page = await orders.list({ limit, status, afterId: list.afterId(cursor) });
      return list.page(page);
    },

    async placeOrder(request, reply) {
      const { petId } = request.body;
      const outcome = await orders.place(petId, rules.placeOrder(petId), claimOf(request, ['placeOrder', petId]));
      const order = created(outcome, reply, 'order');
      reply.header('location', `${basePath}/store/orders/${order.id}`);
      return order;
    },

    async getOrder(request) {
      const order = await orders.get(request.params.orderId);
      if (order === undefined) throw notFound(request.params.orderId);
      return order;
    },

    async updateOrder(request) {
      const { orderId } = request.params;
      const order = await orders.update(orderId, rules.changeOrder(request.body.status));
      if (order === undefined) throw notFound(orderId);
      return order;
    },
  };
};
