package container

// For the external tests: the credentials of a pull, and Docker Hub's key.
var RegistryAuth = registryAuth

const DockerHub = dockerHub
