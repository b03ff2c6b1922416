import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { AppError } from '../errors.js';
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
    // another method, spelling, a trailing slash or more than one segment for the parameter: the router's
    for (const [method, path] of [['GET', '/v1/chat/completions'], ['POST', '/v1/Chat/Completions'], ['POST', '/v1/chat/completions/'], ['POST', '/v1/models/'], ['POST', '/v1/models/a/b'], ['GET', '/v1/models/x']]) {
      await dispatch(ctxFor(method, path), async () => void fellThrough++);
    }
    expect(fellThrough).toBe(6);
  });

  it('takes a path with one parameter segment, decoded as the router decodes it', async () => {
    const dispatch = exactRouteDispatch(
      [route('/mcps/{id}/mcp', (ctx) => ({ id: (ctx.params as Record<string, string>).id, route: (ctx as unknown as { _matchedRoute: string })._matchedRoute })), route('/mcps/{id}', (ctx) => ({ last: (ctx.params as Record<string, string>).id }))],
      {},
    );
    const answer = async (path: string) => {
      const ctx = ctxFor('POST', path);
      let fell = false;
      await dispatch(ctx, async () => void (fell = true));
      return fell ? 'router' : ctx.body;
    };
    expect(await answer('/mcps/abc/mcp')).toEqual({ id: 'abc', route: '/mcps/:id/mcp' });
    expect(await answer('/mcps/a%2Fb/mcp')).toEqual({ id: 'a/b', route: '/mcps/:id/mcp' });
    expect(await answer('/mcps/%E0%A4%A/mcp')).toEqual({ id: '%E0%A4%A', route: '/mcps/:id/mcp' });
    expect(await answer('/mcps/x')).toEqual({ last: 'x' });
    for (const path of ['/mcps//mcp', '/mcps/a/b/mcp', '/mcps/x/', '/mcps/', '/mcps/x/mcp/', '/MCPS/x/mcp']) expect(await answer(path), path).toBe('router');
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

  it("parses a path parameter by the route's schema, keeps the parse of a value it accepted, refuses a bad one every time, and forgets past its bound", async () => {
    let parses = 0;
    const params = z.object({ id: z.string().max(8).transform((id) => (parses++, id)) });
    const dispatch = exactRouteDispatch([{ ...route('/mcps/{id}/mcp', (_ctx, input) => input.params), params }], {});
    const call = async (path: string) => {
      const ctx = ctxFor('POST', path);
      try {
        await dispatch(ctx, async () => undefined);
        return ctx.body;
      } catch (err) {
        return err instanceof AppError ? `${err.status} ${err.code}` : err;
      }
    };
    expect(await call('/mcps/a/mcp')).toEqual({ id: 'a' });
    expect(await call('/mcps/a/mcp')).toEqual({ id: 'a' });
    expect(parses).toBe(1);
    // what it hands on is the same for every call, and no handler can change it for the next
    expect(Object.isFrozen(await call('/mcps/a/mcp'))).toBe(true);
    expect(await call('/mcps/b/mcp')).toEqual({ id: 'b' });
    expect(parses).toBe(2);
    for (let i = 0; i < 2; i++) expect(await call('/mcps/toolongid9/mcp')).toBe('400 invalid_body');
    // 256 values kept at most: past them all are forgotten, and each is parsed again
    for (let i = 0; i < 300; i++) await call(`/mcps/v${i}/mcp`);
    const before = parses;
    expect(await call('/mcps/a/mcp')).toEqual({ id: 'a' });
    expect(parses).toBe(before + 1);
  });
});
