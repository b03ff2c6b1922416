import type { Middleware } from 'koa';
import { HttpMethodEnum, koaBody } from 'koa-body';
import type { AppState } from '../http/context.js';
import { bodyReadError } from '../http/errors-middleware.js';

/** Parses a request's body: a form on the browser pages (/ui/), strict JSON everywhere else. */
export function parseBodies(bodyLimit: number): Middleware<AppState> {
  const parseBody = koaBody({
    json: true,
    urlencoded: false,
    text: false,
    multipart: false,
    jsonStrict: true,
    jsonLimit: bodyLimit,
    formLimit: 64 * 1024,
    parsedMethods: [HttpMethodEnum.POST, HttpMethodEnum.PUT, HttpMethodEnum.PATCH, HttpMethodEnum.DELETE],
    onError: bodyReadError,
  }) as unknown as Middleware<AppState>;
  // Forms are for the browser pages only; every API body is JSON.
  const parseForms = koaBody({ json: false, urlencoded: true, text: false, multipart: false, formLimit: 64 * 1024, onError: bodyReadError }) as unknown as Middleware<AppState>;
  return function parseBodies(ctx, next) {
    return ctx.path.startsWith('/ui/') ? parseForms(ctx, next) : parseBody(ctx, next);
  };
}
