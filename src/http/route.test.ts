import { describe, expect, it } from 'vitest';
import type { Middleware } from 'koa';
import type { AppState } from './context.js';
import { type AnyRouteDef, exactRouteDispatch } from './route.js';

const route = (path: string, handler: AnyRouteDef['handler'], before: Middleware<AppState>[] = []): AnyRouteDef => ({ method: 'post', path, operationId: path, summary: '', tags: [], auth: 'none', responses: {}, before, handler });
const ctxFor = (method: string, path: string) => ({ method, path, state: {}, query: {}, request: {} }) as never as Parameters<Middleware<AppState>>[0];

describe('exact route dispatch', () => {
  it('runs a fixed path’s chain as the router would, with its route set, and leaves every other request to the router', async () => {
    const seen: string[] = [];
    const dispatch = exactRouteDispatch(
      [route('/v1/chat/completions', (ctx) => ({ route: (ctx as unknown as { _matchedRoute: string })._matchedRoute }), [(_c, next) => (seen.push('before'), next())]), route('/v1/models/{id}', () => 'param')],
      {},
    );
    const ctx = ctxFor('POST', '/v1/chat/completions');
    let fellThrough = 0;
    await dispatch(ctx, async () => void fellThrough++);
    expect(ctx.body).toEqual({ route: '/v1/chat/completions' });
    expect(ctx.params).toEqual({});
    expect(seen).toEqual(['before']);
    expect(fellThrough).toBe(0);
    // another method, spelling or a path with a parameter: the router's
    for (const [method, path] of [['GET', '/v1/chat/completions'], ['POST', '/v1/Chat/Completions'], ['POST', '/v1/chat/completions/'], ['POST', '/v1/models/x']]) {
      await dispatch(ctxFor(method, path), async () => void fellThrough++);
    }
    expect(fellThrough).toBe(4);
  });

  it('fails a chain whose middleware calls next twice, and passes a thrown error on', async () => {
    const twice: Middleware<AppState> = async (_c, next) => {
      await next();
      await next();
    };
    await expect(exactRouteDispatch([route('/a', () => 'x', [twice])], {})(ctxFor('POST', '/a'), async () => undefined)).rejects.toThrow('more than once');
    const boom = new Error('boom');
    await expect(exactRouteDispatch([route('/b', () => { throw boom; })], {})(ctxFor('POST', '/b'), async () => undefined)).rejects.toBe(boom);
    const sync: Middleware<AppState> = () => { throw boom; };
    await expect(exactRouteDispatch([route('/c', () => 'x', [sync])], {})(ctxFor('POST', '/c'), async () => undefined)).rejects.toBe(boom);
  });
});
