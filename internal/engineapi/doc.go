// Package engineapi is the protocol swerl speaks with inference engines:
// the OpenAI-compatible chat-completions, completions and models-listing
// bodies, the LoRA-adapter and weight-update endpoints of vLLM and SGLang
// (which swerl serve also answers), the engine kinds, swerl's weight-version
// conventions (the X-Swerl-Policy-Version header, the swerl-vNNNNNN adapter
// names), and how an engine's API key is read.
//
// The rollout client (transforms/rollout), the weight syncer (sinks/weightsync)
// and swerl serve (gpu/serve) all use it, so a field or an endpoint is
// declared once for the client and the server side. It imports nothing else
// of swerl: it sits below all three.
package engineapi
