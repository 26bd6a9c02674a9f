"""The five MCP source servers, the error contract they speak, and what they share."""
