import { z } from 'zod';
import { AppError, forbidden, invalidBody, notFound } from '../errors.js';
import type { AppContext } from '../http/context.js';
import type { OpenStreams } from '../http/open-streams.js';
import { type AnyRouteDef, defineRoute } from '../http/route.js';
import { jsonValue } from '../http/validate.js';
import type { McpInstanceRecord } from '../store/schema.js';
import { isCommandInstance, type McpInstancesService } from './instances.js';
import type { CommandServers } from './command/servers.js';
import { httpTransport } from './transport/http.js';
import type { McpTransport } from './transport/types.js';
import { upstreamUnavailable } from '../upstream/client.js';
import { type GateDeps, type ToolGate, toolGate } from './gate.js';
import { HELD_TEXTS, MCP_PROXY_BODY_LIMIT, proxyMcp, requestBodyOnce } from './proxy.js';
import { toolNameFault } from './policies.js';
import { toolHintsSchema } from './policy-schemas.js';
import { instanceParams } from './schemas.js';
import { type CachedTool, type McpToolsService, toolNotAllowed } from './tools.js';
import { signInRequired } from './upstream-oauth/tokens.js';

export const appMcpInstance = z
  .object({
    id: z.string(),
    name: z.string(),
    url: z.string(),
    enabled: z.boolean(),
    tools: z.array(z.object({ name: z.string(), description: z.string().optional(), input_schema: z.unknown(), annotations: toolHintsSchema.optional() })).optional(),
  })
  .meta({ id: 'AppMcpInstance' });

/** The JSON-RPC error code of a call whose instance needs its owner to sign in (in the server-error range). */
export const SIGN_IN_REQUIRED_RPC = -32003;

/**
 * A proxied call whose instance needs a sign-in is answered in the protocol's shape, for the
 * request's id, so an MCP host shows the message rather than waiting: a JSON-RPC error whose data
 * carries svc's code. A GET or DELETE (no message to answer) gets the contract's 502.
 */
async function signInNeeded(ctx: AppContext, err: AppError): Promise<void> {
  if (ctx.state.activity) ctx.state.activity.failed = true;
  if (ctx.method !== 'POST') throw err;
  let id: unknown = null;
  try {
    const parsed = JSON.parse((await requestBodyOnce(ctx)).toString('utf8')) as { id?: unknown } | { id?: unknown }[];
    const first = Array.isArray(parsed) ? parsed[0] : parsed;
    if (typeof first?.id === 'string' || typeof first?.id === 'number') id = first.id;
  } catch {
    /* no id to answer: null */
  }
  ctx.status = 200;
  ctx.type = 'application/json';
  ctx.body = { jsonrpc: '2.0', id, error: { code: SIGN_IN_REQUIRED_RPC, message: err.message, data: { code: err.code } } };
}

/** The instances a Bearer call's grant names that still exist; never another user's. */
export async function grantedInstances(ctx: AppContext, instances: McpInstancesService): Promise<McpInstanceRecord[]> {
  const grant = ctx.state.grant!;
  const ids = new Set(grant.record.approved?.mcp_servers.flatMap((s) => s.instance_ids) ?? []);
  return (await instances.listOwned(grant.user)).filter((m) => ids.has(m.id));
}

/** One instance of the grant, by id: one lookup (the proxy's path), the same rule as the list. */
export async function grantedInstance(ctx: AppContext, instances: McpInstancesService, id: string): Promise<McpInstanceRecord> {
  const grant = ctx.state.grant!;
  const inGrant = grant.record.approved?.mcp_servers.some((s) => s.instance_ids.includes(id)) ?? false;
  const stored = inGrant ? await instances.find(id) : undefined;
  const found = stored?.owner_id === grant.user.id ? stored : undefined;
  if (!found) throw notFound('No MCP instance with that id in this grant.');
  return found;
}

/** The upstream answered the sign-in's token with a 401 (not a 403: a refresh brings no more scopes). */
const refusedToken = (err: AppError) => (err.cause as { upstreamStatus?: number } | undefined)?.upstreamStatus === 401;

/** The second and last try of a proxied call whose token the server refused, with the refreshed one. */
async function proxyAgain(ctx: AppContext, instances: McpInstancesService, stale: McpInstanceRecord, timeoutMs: number, streams: OpenStreams, gate: ToolGate): Promise<void> {
  const instance = (await instances.find(stale.id)) ?? stale;
  const headers = await instances.openHeaders(instance);
  try {
    await proxyMcp(ctx, instance, httpTransport(instance), headers, timeoutMs, streams, gate);
  } catch (err) {
    // the new token refused as well: the sign-in is no good
    if (!(err instanceof AppError && err.code === 'upstream_rejected' && refusedToken(err))) throw err;
    await instances.oauth!.needsSignIn(instance, 'token_refused');
    throw signInRequired(instance.name);
  }
}

const tool = z.object({ name: z.string(), description: z.string().optional(), input_schema: z.unknown(), annotations: toolHintsSchema.optional() }).meta({ id: 'McpTool' });

/**
 * An `ask` tool called over REST: held until the person decides. Approved, it runs as called;
 * otherwise the app gets a tool result that says why not (a result, not an HTTP error).
 */
async function heldExecute(ctx: AppContext, gate: ToolGate, name: string, args: Record<string, unknown>, run: () => Promise<unknown>) {
  const note = ctx.state.activity;
  const { call, outcome } = await gate.hold(name, args, 'rest');
  const gone = () => gate.fail(call.id, 'the app went away');
  ctx.res.once('close', gone);
  const result = await outcome.finally(() => ctx.res.off('close', gone));
  const whyNot = result !== 'approved' ? null : ctx.res.destroyed ? 'the app went away' : await gate.whyNotNow(name);
  if (result === 'approved' && !whyNot) return { result: await run() };
  if (whyNot) gate.fail(call.id, whyNot);
  const why = result === 'approved' ? 'failed' : result;
  if (note) note.refused = `call_${why}`;
  if (ctx.res.destroyed) throw new AppError('client_closed', 'The client went away.');
  return { result: { content: [{ type: 'text', text: HELD_TEXTS[why] }], isError: true } };
}
const toolParams = instanceParams.extend({ tool_name: z.string().min(1).max(256) });
const executeBody = z.strictObject({ params: z.record(z.string(), jsonValue).default({}).describe('The tool arguments') });
const callToolResult = z.looseObject({ content: z.array(z.unknown()), isError: z.boolean().optional() }).describe('An MCP CallToolResult');

/**
 * App-facing MCP endpoints (decisions: MCP); any app token (scope_user_user or above). Only instances
 * in the token's grant exist here; a disabled one is listed but refuses calls.
 */
export function appMcpRoutes(
  instances: McpInstancesService,
  tools: McpToolsService,
  originAllowed: (ctx: AppContext) => Promise<boolean>,
  timeoutMs: number,
  streams: OpenStreams,
  gates: GateDeps,
  commands?: CommandServers,
): AnyRouteDef[] {
  const gateOf = (ctx: AppContext, m: McpInstanceRecord) => toolGate(gates, ctx.state.grant!, m);
  /** the tools this grant may see: the denied ones are left out, as from tools/list */
  const seen = (ctx: AppContext, m: McpInstanceRecord, list: CachedTool[]) => {
    const visible = gateOf(ctx, m).visible;
    return visible ? list.filter((t) => visible(t.name)) : list;
  };
  const toAppInstance = async (ctx: AppContext, m: McpInstanceRecord) => {
    const cached = await tools.cached(m);
    return { id: m.id, name: m.name, url: m.url, enabled: m.enabled, ...(cached ? { tools: seen(ctx, m, cached) } : {}) };
  };
  const proxy = async (ctx: AppContext, id: string) => {
    if (!(await originAllowed(ctx))) throw forbidden('This Origin may not use the MCP proxy with this app\'s token.', 'origin_not_allowed');
    const instance = await grantedInstance(ctx, instances, id);
    if (!instance.enabled) throw new AppError('mcp_instance_disabled', 'This MCP instance is disabled by its owner.');
    try {
      await proxyWithSignIn(ctx, instance);
    } catch (err) {
      if (err instanceof AppError && err.code === 'mcp_sign_in_required' && !ctx.res.headersSent) return signInNeeded(ctx, err);
      throw err;
    }
  };
  /** The proxied call with the instance's sign-in: a token the server refuses is refreshed, and the call sent once more. */
  const proxyWithSignIn = async (ctx: AppContext, instance: McpInstanceRecord) => {
    const headers = await instances.openHeaders(instance);
    const gate = gateOf(ctx, instance);
    try {
      await proxyMcp(ctx, instance, transportOf(instance, ctx.state.grant!.record.id, commands), headers, timeoutMs, streams, gate);
    } catch (err) {
      // the server refused the sign-in's token: refreshed, or the instance needs a sign-in
      if (!(instance.oauth && instances.oauth && err instanceof AppError && err.code === 'upstream_rejected')) throw err;
      if (!(await instances.oauth.refused(instance, headers.Authorization))) throw signInRequired(instance.name);
      // a 401 came before the server ran anything: the call (its body was read whole) goes again
      // once, with the new token; not a held call, whose person approved one run
      if (!refusedToken(err) || gate.held || ctx.res.headersSent) throw err;
      await proxyAgain(ctx, instances, instance, timeoutMs, streams, gateOf(ctx, instance));
    }
  };
  const proxyDoc = {
    tags: ['apps'],
    auth: 'bearer' as const,
    plane: 'data' as const,
    params: instanceParams,
    rawBody: true,
    responses: { 200: { description: 'The MCP server\'s answer: JSON or text/event-stream, passed through' } },
    // 405 (with Allow), 415 (not JSON in UTF-8), 429 (the grant's limits), 503 (a command server's bounds or back-off)
    errors: [400, 401, 403, 404, 405, 413, 415, 429, 502, 503, 504],
  };
  return [
    defineRoute({
      method: 'get',
      path: '/svc/v1/apps/mcps',
      operationId: 'listAppMcpInstances',
      summary: "The MCP instances in this token's grant",
      tags: ['apps'],
      auth: 'bearer',
      responses: { 200: { description: 'Instances', schema: z.object({ data: z.array(appMcpInstance) }) } },
      errors: [401, 403],
      handler: async (ctx) => ({ data: await Promise.all((await grantedInstances(ctx, instances)).map((m) => toAppInstance(ctx, m))) }),
    }),
    defineRoute({
      method: 'get',
      path: '/svc/v1/apps/mcps/{id}',
      operationId: 'getAppMcpInstance',
      summary: "One MCP instance of this token's grant (others are 404)",
      tags: ['apps'],
      auth: 'bearer',
      params: instanceParams,
      responses: { 200: { description: 'The instance', schema: appMcpInstance } },
      errors: [401, 403, 404],
      handler: async (ctx, { params }) => toAppInstance(ctx, await grantedInstance(ctx, instances, params.id)),
    }),
    defineRoute({
      method: 'post',
      path: '/svc/v1/apps/mcps/{id}/tools/refresh',
      operationId: 'refreshAppMcpTools',
      summary: 'Fetch the tool list from the MCP server (Streamable HTTP, else HTTP+SSE), cache it, answer the allowed tools',
      tags: ['apps'],
      auth: 'bearer',
      params: instanceParams,
      responses: { 200: { description: 'Allowed tools', schema: z.object({ tools: z.array(tool) }) } },
      errors: [401, 403, 404, 502, 503, 504],
      async handler(ctx, { params }) {
        if (ctx.state.activity) ctx.state.activity.mcp_method = 'tools/list';
        const instance = await grantedInstance(ctx, instances, params.id);
        return { tools: seen(ctx, instance, await tools.refresh(instance, undefined, ctx.state.grant!.record.id)) };
      },
    }),
    defineRoute({
      method: 'post',
      path: '/svc/v1/apps/mcps/{id}/tools/{tool_name}/execute',
      operationId: 'executeAppMcpTool',
      summary: "Call a tool; a tool's own failure is result.isError, not an HTTP error",
      description:
        "A tool the grant denies is 403 tool_not_allowed. A tool whose choice is ask is held until the person approves that call (GET /svc/v1/calls): approved, it runs; declined, or not answered within --call-approval-timeout, the result is isError with a text that says so. A held call may carry at most 64 KiB of arguments (413 payload_too_large beyond, and it does not run).",
      tags: ['apps'],
      auth: 'bearer',
      params: toolParams,
      body: executeBody,
      responses: { 200: { description: 'The MCP CallToolResult', schema: z.object({ result: callToolResult }) } },
      errors: [400, 401, 403, 404, 413, 429, 502, 503, 504],
      async handler(ctx, { params, body }) {
        if (ctx.state.activity) Object.assign(ctx.state.activity, { mcp_method: 'tools/call', tool: params.tool_name });
        const instance = await grantedInstance(ctx, instances, params.id);
        if (!instance.enabled) throw new AppError('mcp_instance_disabled', 'This MCP instance is disabled by its owner.');
        const fault = toolNameFault(params.tool_name);
        if (fault) throw invalidBody(`The tool name ${JSON.stringify(params.tool_name.slice(0, 100))} ${fault}; tool names are exact.`, 'tool_name');
        const gate = gateOf(ctx, instance);
        const choice = await gate.choose(params.tool_name);
        if (choice === 'deny') throw toolNotAllowed(params.tool_name);
        const run = () => tools.execute(instance, params.tool_name, body.params, ctx.state.grant!.record.id);
        if (choice === 'ask') return heldExecute(ctx, gate, params.tool_name, body.params, run);
        return { result: await run() };
      },
    }),
    defineRoute({
      ...proxyDoc,
      method: 'post',
      path: '/svc/v1/apps/mcps/{id}/mcp',
      operationId: 'mcpProxyPost',
      summary: `Streamable HTTP MCP proxy: JSON-RPC messages to the instance (body up to ${MCP_PROXY_BODY_LIMIT / 1048576} MiB)`,
      handler: (ctx, { params }) => proxy(ctx, params.id),
    }),
    defineRoute({
      ...proxyDoc,
      method: 'get',
      path: '/svc/v1/apps/mcps/{id}/mcp',
      operationId: 'mcpProxyGet',
      summary: 'Streamable HTTP MCP proxy: the server-to-client SSE stream',
      stream: true,
      handler: (ctx, { params }) => proxy(ctx, params.id),
    }),
    defineRoute({
      ...proxyDoc,
      method: 'delete',
      path: '/svc/v1/apps/mcps/{id}/mcp',
      operationId: 'mcpProxyDelete',
      summary: 'Streamable HTTP MCP proxy: end the MCP session',
      handler: (ctx, { params }) => proxy(ctx, params.id),
    }),
  ];
}

/** How the proxy reaches an instance: its URL, or the grant's processes of a command server. */
function transportOf(instance: McpInstanceRecord, grantId: string, commands: CommandServers | undefined): McpTransport {
  if (!isCommandInstance(instance)) return httpTransport(instance);
  if (!commands) throw upstreamUnavailable('svc does not run command servers here.');
  return commands.transport(instance, grantId);
}
