"""What gpuprov check prints: findings and recommendations, and the JSON schema they follow."""
