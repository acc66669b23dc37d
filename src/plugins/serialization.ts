/**
 * fastify's response serializers (fast-json-stringify, by fastify's own compiler), each compiled
 * once per schema in a process (compile-once.ts).
 */
import { SerializerSelector } from '@fastify/fast-json-stringify-compiler';
import { CompiledOnce } from './compile-once.js';

type SerializerFactory = ReturnType<typeof SerializerSelector>;

const fastifysOwn = SerializerSelector();
const serializers = new CompiledOnce<ReturnType<ReturnType<SerializerFactory>>>();

export const serializerFactory: SerializerFactory = (externalSchemas, options) => {
  const compile = fastifysOwn(externalSchemas, options);
  // A server with other options or shared schemas compiles the same schema otherwise.
  const context = JSON.stringify([externalSchemas, options]);
  return (route) => serializers.get(context, route.schema, () => compile(route));
};
