import os from 'node:os';
import { appDisplayName } from '../access-requests/client-kinds.js';
import { AccessRequestsService, type AppInfoLookup } from '../access-requests/service.js';
import type { ActivityStore } from '../activity/store.js';
import { DEFAULT_LOGIN_LIMITS, LoginService } from '../auth/login.js';
import { LoginLinks } from '../auth/login-links.js';
import { UsersService } from '../auth/users.js';
import { LOCAL_LOGIN_LABEL } from '../daemon-info.js';
import type { AppDeps } from '../http/context.js';
import { ApiKeysService } from '../keys/service.js';
import { HeldCalls } from '../mcp/held-calls.js';
import { type CommandSpec, McpInstancesService } from '../mcp/instances.js';
import { CommandServers } from '../mcp/command/servers.js';
import type { CommandSupervisor } from '../mcp/command/supervisor.js';
import { ToolPolicies } from '../mcp/policies.js';
import { McpToolsService } from '../mcp/tools.js';
import { UpstreamOAuth } from '../mcp/upstream-oauth/service.js';
import { ModelCatalog } from '../models/catalog.js';
import { ModelDownloads, replicaOf } from '../models/downloads.js';
import { DesktopNotifier } from '../notify/desktop.js';
import { OAuthClientsService } from '../oauth/clients.js';
import { ProvidersService } from '../providers/service.js';

/** The services every feature is built on, made once per app and handed to the routes and pages. */
export interface Services {
  users: UsersService;
  login: LoginService;
  loginLinks: LoginLinks;
  instances: McpInstancesService;
  upstreamOAuth: UpstreamOAuth;
  clients: OAuthClientsService;
  /** what an app is, by its client id: an API key's app or a registered OAuth client */
  appInfo: AppInfoLookup;
  activity: ActivityStore;
  requests: AccessRequestsService;
  keys: ApiKeysService;
  mcpTools: McpToolsService;
  policies: ToolPolicies;
  held: HeldCalls;
  providers: ProvidersService;
  catalog: ModelCatalog;
  downloads: ModelDownloads;
  /** the command servers' processes, when this daemon runs them */
  commands?: CommandServers;
}

/** Builds the services on the store and tells the person on the desktop what waits for them. */
/** `supervisor`: what runs command MCP servers, when something does (tries one on add, reports its processes). */
export async function createServices(deps: AppDeps, activity: ActivityStore, supervisor?: CommandSupervisor): Promise<Services> {
  const users = new UsersService(deps.repos, deps.clock);
  const login = new LoginService(users, deps.clock, deps.localLoginProof ?? deps.box.derive(LOCAL_LOGIN_LABEL), DEFAULT_LOGIN_LIMITS, deps.repos.loginFailures);
  const loginLinks = new LoginLinks(deps.box, deps.repos, deps.clock);
  const notifier = new DesktopNotifier({ enabled: deps.config.notify, logger: deps.logger });
  const upstreamOAuth = new UpstreamOAuth({ repos: deps.repos, box: deps.box, clock: deps.clock, logger: deps.logger, baseUrl: deps.baseUrl, notify: (t, b, l) => notifier.notify(t, b, l) });
  // the instances' service tells the registry what to run; the registry is its hooks
  let commands: CommandServers | undefined;
  const hooks = supervisor ? { probe: (spec: CommandSpec, secrets: string[]) => commands!.probe(spec, secrets), status: (id: string) => commands!.status(id) } : {};
  const instances: McpInstancesService = new McpInstancesService(deps.repos, deps.box, deps.clock, hooks, upstreamOAuth);
  if (supervisor) {
    commands = new CommandServers(supervisor, instances, deps.config.mcpTimeoutMs);
    commands.watch(deps.repos);
  }
  const clients = new OAuthClientsService(deps.repos, deps.box, deps.clock);
  const appInfo: AppInfoLookup = async (clientId) => {
    const key = await keys.appInfo(clientId);
    if (key) return key;
    const c = await clients.find(clientId);
    return c ? { name: appDisplayName(c.name), description: c.description ?? undefined, redirect_uris: c.redirect_uris, kind: c.kind ?? 'registered' } : undefined;
  };
  const requests = new AccessRequestsService(
    deps.repos,
    deps.clock,
    deps.logger,
    appInfo,
    { draftsPerClient: deps.config.maxDraftsPerClient, drafts: deps.config.maxDrafts },
    activity,
  );
  const keys = new ApiKeysService(deps.repos, requests, deps.clock);
  const mcpTools = new McpToolsService(deps.repos, instances, deps.clock, deps.config.mcpTimeoutMs, commands);
  // A review waits for an instance's tool list at most this long; a call of a tool may wait the full timeout.
  const policies = new ToolPolicies(deps.repos, mcpTools, deps.clock, deps.logger, Math.min(5_000, deps.config.mcpTimeoutMs));
  const held = new HeldCalls(deps.clock, deps.logger, deps.config.callApprovalTimeoutS * 1000, deps.repos.heldCalls, (view) => policies.remember(view));
  notifyThePerson(deps, held, appInfo, notifier);
  const providers = new ProvidersService(deps.repos, deps.box, deps.clock, deps.logger);
  const catalog = new ModelCatalog(deps.repos, deps.clock);
  const downloads = new ModelDownloads(deps.config.dataDir, deps.repos, deps.clock, deps.logger, {
    quotaBytes: deps.config.downloadQuotaBytes,
    allowNetworks: deps.config.downloadAllowNetworks,
    replica: deps.config.database ? replicaOf(os.hostname(), deps.config.dataDir) : undefined,
  });
  return { users, login, loginLinks, instances, upstreamOAuth, clients, appInfo, activity, requests, keys, mcpTools, policies, held, providers, catalog, downloads, commands };
}

/** A desktop notice for each held tool call and each new access request, pointing at its page. */
function notifyThePerson(deps: AppDeps, held: HeldCalls, appInfo: AppInfoLookup, notifier: DesktopNotifier): void {
  held.onHeld((c) => notifier.notify(`svc: ${c.app_name ?? c.app_client_id} wants to run ${c.tool}`, `On ${c.instance_name}. Approve or deny it at`, `${deps.baseUrl()}/ui/calls`));
  // A new draft (created and not changed since) is news for the person too. Not on a team server:
  // every replica hears every draft (so each would announce it), and following the changes costs
  // each replica a read of every request another one writes; replicas run on servers anyway.
  if (!deps.config.notify || deps.config.database) return;
  deps.repos.accessRequests.onChange((id, r) => {
    if (r?.status !== 'draft' || r.created_at !== r.updated_at) return;
    void appInfo(r.app_client_id).then(
      (info) => notifier.notify(`svc: ${info?.name ?? r.app_client_id} asks for access`, 'Review it at', `${deps.baseUrl()}/ui/apps/access-requests/review?id=${encodeURIComponent(id)}`),
      () => undefined,
    );
  });
}
