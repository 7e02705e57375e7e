export declare const PACKAGE_DIR: string;
export declare const REPO_ROOT: string;
export declare function memvaultBin(): string;
export declare function freePort(taken?: Set<number>): Promise<number>;

export interface TokenClaims {
  tenant: string;
  subject?: string;
  scope?: string;
  agentRole?: string;
  maxSensitivity?: "public" | "internal" | "pii";
  ttl?: number;
}

export interface Where {
  bin: string;
  env: Record<string, string>;
}

export interface Stack extends Where {
  url: string;
  port: number;
  mcpPort: number;
  dir: string;
  output(): string;
  mint(claims: TokenClaims): Promise<string>;
  stop(): Promise<void>;
}

export declare function startStack(options?: { timeoutMs?: number; env?: Record<string, string> }): Promise<Stack>;
export declare function mintToken(where: Where, claims: TokenClaims): Promise<string>;
