"""The only package that imports litellm (lazily): client, retries, response cache, usage and cost."""
