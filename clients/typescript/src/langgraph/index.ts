/**
 * LangGraph.js adapters on memvault (`@memvault/client/langgraph`): {@link MemvaultSaver},
 * a checkpointer on run state, and {@link MemvaultStore}, a long-term store on governed
 * memory. Needs `@langchain/langgraph-checkpoint` and `@langchain/core` (peer dependencies).
 */
export {
  ArtifactDigestMismatch,
  CheckpointConflict,
  CheckpointWithheld,
  MemvaultSaver,
  ThreadForked,
  type MemvaultSaverOptions,
} from "./saver.js";
export {
  MAX_NAMESPACE_DEPTH,
  MemvaultStore,
  NAMESPACE_SCOPE,
  StoreValueError,
  prefixTag,
  type MemvaultStoreOptions,
} from "./store.js";
