"""/mcp: the Model Context Protocol endpoint for AI agents (views -> server -> tools -> the API's services)."""
